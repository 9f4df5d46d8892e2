package audit

import (
	"io"
	"time"
)

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
