// Package clock is the harness's monotonic clock, in nanoseconds since the
// run started, and the measurement windows read against it. Every load and
// peer of one run reads the same Clock, so that their windows agree.
package clock

import "time"

// Clock counts monotonic nanoseconds from its start.
type Clock struct{ base time.Time }

// New starts a clock at zero now.
func New() Clock { return Clock{base: time.Now()} }

// Now is the nanoseconds since the clock started (monotonic).
func (c Clock) Now() int64 { return int64(time.Since(c.base)) }

// Base is the moment the clock reads zero.
func (c Clock) Base() time.Time { return c.base }

// Window starts counting after warm and counts for dur.
func (c Clock) Window(warm, dur time.Duration) Window {
	from := c.Now() + int64(warm)
	return Window{From: from, Until: from + int64(dur)}
}

// SleepUntil sleeps until the clock reads t.
func (c Clock) SleepUntil(t int64) {
	if d := time.Duration(t - c.Now()); d > 0 {
		time.Sleep(d)
	}
}

// Window is the part of a timed run that counts: [From, Until) in the
// clock's nanoseconds.
type Window struct{ From, Until int64 }

// Has says whether t is inside the window.
func (w Window) Has(t int64) bool { return t >= w.From && t < w.Until }

// Seconds is the window's length.
func (w Window) Seconds() float64 { return float64(w.Until-w.From) / 1e9 }
