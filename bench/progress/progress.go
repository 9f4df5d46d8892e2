// Package progress is bench's progress bar on stderr.
package progress

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// Bar is the bar on stderr: one step per measured system and scenario.
type Bar struct {
	mu  sync.Mutex
	bar *progressbar.ProgressBar
	w   io.Writer
	n   int
}

// New is a bar of total steps on w, drawn only when show is set (and
// total positive); lines logged through it are printed either way.
func New(w io.Writer, total int, show bool) *Bar {
	p := &Bar{w: w}
	if show && total > 0 {
		p.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription("bench"),
			progressbar.OptionShowCount(),
			progressbar.OptionSetWidth(24),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionShowElapsedTimeOnFinish(),
			progressbar.OptionSetPredictTime(false),
			progressbar.OptionOnCompletion(func() { _, _ = fmt.Fprintln(w) }),
		)
	}
	return p
}

// IsTerminal reports whether w is a terminal: the bar redraws itself with
// carriage returns, which only make noise in a redirected log.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Step starts the next step: the previous one is done.
func (p *Bar) Step(desc string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar == nil {
		return
	}
	if p.n > 0 {
		_ = p.bar.Add(1)
	}
	p.n++
	p.bar.Describe(desc)
}

// Log prints a line above the bar.
func (p *Bar) Log(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		_ = p.bar.Clear()
	}
	_, _ = fmt.Fprintln(p.w, line)
}

// Finish completes the bar.
func (p *Bar) Finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}
