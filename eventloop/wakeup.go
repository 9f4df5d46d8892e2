package eventloop

import (
	"math"
	"sync/atomic"
	"time"
)

// wakeup is the owner's plan for its next tick, shared with the ticker
// goroutine: the time (on the owner's monotonic clock) at which the earliest
// timer may be due, or none. The owner moves it earlier when it arms an
// earlier deadline and sets it after every tick; each change wakes the ticker
// to re-plan.
type wakeup struct {
	at     atomic.Int64  // monotonic offset in ns; math.MaxInt64 for none
	replan chan struct{} // cap 1
}

func (w *wakeup) init() {
	w.replan = make(chan struct{}, 1)
	w.at.Store(math.MaxInt64)
}

// planned returns the planned wake-up, if any.
func (w *wakeup) planned() (time.Duration, bool) {
	at := w.at.Load()
	return time.Duration(at), at != math.MaxInt64
}

// set replaces the plan and wakes the ticker.
func (w *wakeup) set(at time.Duration, ok bool) {
	if !ok {
		at = math.MaxInt64
	}
	w.at.Store(int64(at))
	select {
	case w.replan <- struct{}{}:
	default:
	}
}
