package eventloop

import "time"

// Clock is the owner's only source of time. Now returns the wall clock, used
// for fencing tokens and for what people read, and a monotonic offset from a
// fixed origin, used for every duration and deadline. Both come from one call
// so that they describe the same instant; they differ only when the wall
// clock is stepped, which must move tokens and audit times but never a lease.
// Now must be safe for concurrent use: the ticker goroutine reads it too.
type Clock interface {
	Now() (wall time.Time, mono time.Duration)
}

// systemClock is the process's clock; offsets count from its creation.
type systemClock struct{ origin time.Time }

func newSystemClock() systemClock { return systemClock{origin: time.Now()} }

func (c systemClock) Now() (time.Time, time.Duration) {
	wall := time.Now()
	return wall, wall.Sub(c.origin)
}

// offsetClock moves the wall clock of another by an offset that may change
// while the server runs, the monotonic offset untouched: a stepped wall
// clock, as far as a single server can tell (the wall Time's own monotonic
// reading moves too, which only HA's arithmetic would notice: see
// Config.TestWallClockOffset). Only Config.TestWallClockOffset makes one.
type offsetClock struct {
	Clock
	offset func() time.Duration
}

func (c offsetClock) Now() (time.Time, time.Duration) {
	wall, mono := c.Clock.Now()
	return wall.Add(c.offset()), mono
}
