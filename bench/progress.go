package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// progress is the bar on stderr: one step per measured system and scenario.
type progress struct {
	mu  sync.Mutex
	bar *progressbar.ProgressBar
	w   io.Writer
	n   int
}

func newProgress(w io.Writer, total int, show bool) *progress {
	p := &progress{w: w}
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

// isTerminal reports whether w is a terminal: the bar redraws itself with
// carriage returns, which only make noise in a redirected log.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// step starts the next step: the previous one is done.
func (p *progress) step(desc string) {
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

// log prints a line above the bar.
func (p *progress) log(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		_ = p.bar.Clear()
	}
	_, _ = fmt.Fprintln(p.w, line)
}

func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}
