package audit

import (
	"io"
	"testing"
	"time"
)

// LogLines captures a Log's diagnostics for the external tests.
type LogLines = logLines

// NewLogLines returns an empty capture.
func NewLogLines() LogLines { return newLogLines() }

// Await returns the next line whose message contains substr.
func (c logLines) Await(t *testing.T, substr string) map[string]any {
	t.Helper()
	return c.await(t, substr)
}

// WithFaults lets the external tests put a failing disk between the writer
// and its files, retry at once, and drive the reporter's clock.
func WithFaults(wrap func(io.Writer) io.Writer, maxPending int, reportEvery time.Duration, now func() time.Time) Option {
	return func(o *options) {
		o.wrap = wrap
		o.maxPending = maxPending
		o.reportEvery = reportEvery
		o.now = now
		o.retryEvery = time.Millisecond
		o.checkEvery = time.Millisecond
	}
}
