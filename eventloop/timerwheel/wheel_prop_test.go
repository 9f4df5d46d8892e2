package timerwheel

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// model is the wheel as its documentation describes it: a map from armed timer
// to the tick at which it fires, and the first tick the wheel has not processed.
type model struct {
	tick  time.Duration
	fires map[int]int64 // armed timer → tick it fires at
	at    map[int]time.Duration
	next  int64 // ticks before next have been processed
}

// ceilTick is the deadline rounded up to a tick, computed without overflow.
func (m *model) ceilTick(at time.Duration) int64 {
	q, r := at/m.tick, at%m.tick
	if r > 0 {
		q++
	}
	return int64(q)
}

func (m *model) schedule(i int, at time.Duration) {
	m.fires[i] = max(m.ceilTick(at), m.next) // a deadline already processed fires at the next tick
	m.at[i] = at
}

func (m *model) stop(i int) {
	delete(m.fires, i)
	delete(m.at, i)
}

// checkInvariants verifies the ring outside Advance: every slot is a
// consistent circular list of armed timers that hash to it and are not yet
// processed, and Len counts them.
func checkInvariants(w *Wheel[int]) error {
	n := 0
	for i := range w.slots {
		head := &w.slots[i]
		prev := head
		for t := head.next; t != head; t = t.next {
			switch {
			case t == nil:
				return fmt.Errorf("slot %d: nil link", i)
			case t.prev != prev:
				return fmt.Errorf("slot %d: broken prev link", i)
			case !t.armed || t.due:
				return fmt.Errorf("slot %d: linked timer %v armed=%v due=%v", i, t.Value, t.armed, t.due)
			case t.tick&w.mask != int64(i):
				return fmt.Errorf("timer %v with tick %d in slot %d", t.Value, t.tick, i)
			case t.tick < w.next:
				return fmt.Errorf("timer %v at tick %d, but ticks before %d are processed", t.Value, t.tick, w.next)
			}
			prev = t
			if n++; n > w.len {
				return fmt.Errorf("more than Len()=%d timers linked (or a cycle)", w.len)
			}
		}
		if head.prev != prev {
			return fmt.Errorf("slot %d: head.prev is not the last timer", i)
		}
	}
	if n != w.len {
		return fmt.Errorf("%d timers linked, Len() = %d", n, w.len)
	}
	return nil
}

// TestWheelMatchesModel runs random Schedule, Stop and Advance sequences
// (time never going back, with jumps within a tick and over several turns),
// with callbacks that re-schedule the fired timer and schedule or stop others,
// and compares the wheel with the model after every step.
func TestWheelMatchesModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		const tick = time.Millisecond
		slots := rapid.SampledFrom([]int{8, 8, 8, 1, 4}).Draw(rt, "slots")
		turn := int64(slots)
		w := New[int](tick, slots)
		timers := make([]Timer[int], rapid.IntRange(1, 16).Draw(rt, "timers"))
		for i := range timers {
			timers[i].Value = i
		}
		m := &model{tick: tick, fires: map[int]int64{}, at: map[int]time.Duration{}}
		var now time.Duration // time of the last Advance

		timerGen := rapid.IntRange(0, len(timers)-1)
		subTick := rapid.SampledFrom([]time.Duration{0, 0, 1, tick / 2, tick - 1})
		// deadline draws a deadline around now: on and off tick boundaries,
		// in the past, within this turn and several turns on, and oddities.
		deadline := func(rt *rapid.T, label string) time.Duration {
			switch rapid.IntRange(0, 9).Draw(rt, label+"Kind") {
			case 0:
				return 0
			case 1:
				return now
			case 2:
				return now - time.Duration(rapid.Int64Range(1, 3*turn).Draw(rt, label+"Ago"))*tick
			default:
				base := now / tick * tick
				off := rapid.Int64Range(-turn, 6*turn).Draw(rt, label+"Ticks")
				return base + time.Duration(off)*tick + subTick.Draw(rt, label+"Sub")
			}
		}

		check := func(rt *rapid.T, where string) {
			if err := checkInvariants(w); err != nil {
				rt.Fatalf("%s: %v", where, err)
			}
			if w.Len() != len(m.fires) {
				rt.Fatalf("%s: Len() = %d, model has %d armed", where, w.Len(), len(m.fires))
			}
			for i := range timers {
				tk, armed := m.fires[i]
				d, ok := w.Deadline(&timers[i])
				if ok != armed || timers[i].Armed() != armed {
					rt.Fatalf("%s: timer %d Deadline ok=%v Armed=%v, model armed=%v", where, i, ok, timers[i].Armed(), armed)
				}
				if armed && d != time.Duration(tk)*tick {
					rt.Fatalf("%s: timer %d Deadline = %v, model %v", where, i, d, time.Duration(tk)*tick)
				}
				if armed && d < m.at[i] {
					rt.Fatalf("%s: timer %d Deadline %v before its deadline %v", where, i, d, m.at[i])
				}
			}
		}

		rt.Repeat(map[string]func(*rapid.T){
			"schedule": func(rt *rapid.T) {
				i := timerGen.Draw(rt, "i")
				at := deadline(rt, "at")
				w.Schedule(&timers[i], at)
				m.schedule(i, at)
			},
			"stop": func(rt *rapid.T) {
				i := timerGen.Draw(rt, "i")
				w.Stop(&timers[i])
				m.stop(i)
			},
			"advance": func(rt *rapid.T) {
				var step time.Duration
				switch rapid.IntRange(0, 5).Draw(rt, "jumpKind") {
				case 0: // the same time again
				case 1: // within a tick, maybe across a boundary
					step = time.Duration(rapid.Int64Range(1, int64(tick)-1).Draw(rt, "ns"))
				case 2: // exactly to the next tick boundary
					step = (now/tick+1)*tick - now
				case 3, 4: // a few ticks
					step = time.Duration(rapid.Int64Range(1, turn+2).Draw(rt, "ticks"))*tick + subTick.Draw(rt, "sub")
				case 5: // several turns
					step = time.Duration(rapid.Int64Range(turn, 12*turn).Draw(rt, "ticks"))*tick + subTick.Draw(rt, "sub")
				}
				now += step

				// What must fire: every armed timer whose tick has been reached.
				pending := map[int]bool{}
				last := int64(now / tick)
				if last >= m.next {
					for i, tk := range m.fires {
						if tk <= last {
							pending[i] = true
						}
					}
					m.next = last + 1
				}
				due := len(pending)
				fired := 0
				w.Advance(now, func(tm *Timer[int]) {
					i := tm.Value
					if !pending[i] {
						tk, armed := m.fires[i]
						rt.Fatalf("Advance(%v) fired timer %d: not due (model: armed %v, tick %d), or stopped or re-armed by an earlier callback",
							now, i, armed, tk)
					}
					if m.at[i] > now {
						rt.Fatalf("Advance(%v) fired timer %d early: deadline %v", now, i, m.at[i])
					}
					if tm.Armed() {
						rt.Fatalf("timer %d armed in its callback", i)
					}
					delete(pending, i)
					m.stop(i)
					fired++
					// Callbacks may re-arm this timer and schedule or stop any.
					for range rapid.IntRange(0, 2).Draw(rt, "actions") {
						j := i
						if rapid.Bool().Draw(rt, "other") {
							j = timerGen.Draw(rt, "j")
						}
						if rapid.IntRange(0, 2).Draw(rt, "cbStop") == 0 {
							w.Stop(&timers[j])
							m.stop(j)
						} else {
							at := deadline(rt, "cbAt")
							w.Schedule(&timers[j], at)
							m.schedule(j, at)
						}
						delete(pending, j) // not fired by this Advance
					}
				})
				if len(pending) != 0 {
					rt.Fatalf("Advance(%v) did not fire due timers %v (%d due, %d fired)", now, pending, due, fired)
				}
				// Nothing left in the wheel is overdue.
				for i := range timers {
					if d, ok := w.Deadline(&timers[i]); ok && d <= now {
						rt.Fatalf("timer %d left armed with Deadline %v after Advance(%v)", i, d, now)
					}
				}
			},
			"": func(rt *rapid.T) { check(rt, "after step") },
		})
	})
}
