package eventloop

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

// wakeup is the owner's plan for its next tick, shared with the ticker
// goroutine: the time (on the owner's monotonic clock) at which the earliest
// timer may be due, or none. The owner moves it earlier when it arms an
// earlier deadline and sets it after every tick; each change wakes the ticker
// to re-plan.
//
// The ticker reads no clock of its own: the plan says how long after the
// turn that made it the tick is due, and the ticker, which learns of the
// plan after that turn, sleeps that long. It wakes late by the moment it
// took to learn, never early.
type wakeup struct {
	at     atomic.Int64  // monotonic offset in ns; math.MaxInt64 for none
	delay  atomic.Int64  // at minus the planning turn's now, in ns; math.MaxInt64 for none
	replan chan struct{} // cap 1
}

func (w *wakeup) init() {
	w.replan = make(chan struct{}, 1)
	w.at.Store(math.MaxInt64)
	w.delay.Store(math.MaxInt64)
}

// planned returns the planned wake-up, if any.
func (w *wakeup) planned() (time.Duration, bool) {
	at := w.at.Load()
	return time.Duration(at), at != math.MaxInt64
}

// sleep returns how long the ticker should sleep from when it learnt of the
// plan, if there is one.
func (w *wakeup) sleep() (time.Duration, bool) {
	d := w.delay.Load()
	return max(time.Duration(d), 0), d != math.MaxInt64
}

// set replaces the plan, made by the turn whose now is now, and wakes the
// ticker.
func (w *wakeup) set(at, now time.Duration, ok bool) {
	d := at - now
	if !ok {
		at, d = math.MaxInt64, math.MaxInt64
	}
	w.at.Store(int64(at))
	w.delay.Store(int64(d))
	select {
	case w.replan <- struct{}{}:
	default:
	}
}

// tickLoop runs on its own goroutine, not the loop. It sleeps until the
// owner's next wake-up (see wakeup), hands the loop a tick, and waits for
// the tick to plan the next one; a deadline earlier than planned wakes it to
// re-plan. A server with no timers due soon costs no CPU, while expiry keeps
// the wheel's 1 ms precision. It returns an error when the loop refuses a
// tick: the loop is gone, and no lease could ever expire again.
func tickLoop(w *wakeup, tick func() error, stop <-chan struct{}) error {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		var fire <-chan time.Time
		if d, ok := w.sleep(); ok {
			timer.Reset(d)
			fire = timer.C
		}
		select {
		case <-fire:
			if err := tick(); err != nil {
				select {
				case <-stop: // the loop stopped because the server did
					return nil
				default:
					return fmt.Errorf("hand the event loop a tick: %w", err)
				}
			}
			select { // the tick re-plans when it is done
			case <-w.replan:
			case <-stop:
				return nil
			}
		case <-w.replan:
			timer.Stop()
		case <-stop:
			return nil
		}
	}
}
