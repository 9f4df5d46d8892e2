package timerwheel_test

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/monolock/monolock/eventloop/timerwheel"
)

const ms = time.Millisecond

// recorder collects the timers fired by Advance, by their Value.
type recorder struct {
	fired []int
}

func (r *recorder) fire(t *timerwheel.Timer[int]) { r.fired = append(r.fired, t.Value) }

// advance runs w.Advance(now) and returns what fired, sorted.
func (r *recorder) advance(w *timerwheel.Wheel[int], now time.Duration) []int {
	r.fired = r.fired[:0]
	w.Advance(now, r.fire)
	got := slices.Clone(r.fired)
	slices.Sort(got)
	return got
}

func newTimers(n int) []timerwheel.Timer[int] {
	ts := make([]timerwheel.Timer[int], n)
	for i := range ts {
		ts[i].Value = i
	}
	return ts
}

func wantFired(t *testing.T, now time.Duration, got []int, want ...int) {
	t.Helper()
	if want == nil {
		want = []int{}
	}
	if got == nil {
		got = []int{}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Advance(%v) fired %v, want %v", now, got, want)
	}
}

func wantDeadline(t *testing.T, w *timerwheel.Wheel[int], tm *timerwheel.Timer[int], want time.Duration) {
	t.Helper()
	d, ok := w.Deadline(tm)
	if !ok || !tm.Armed() {
		t.Fatalf("timer %v not armed (Deadline ok=%v, Armed=%v)", tm.Value, ok, tm.Armed())
	}
	if d != want {
		t.Fatalf("Deadline(timer %v) = %v, want %v", tm.Value, d, want)
	}
}

func wantStopped(t *testing.T, w *timerwheel.Wheel[int], tm *timerwheel.Timer[int]) {
	t.Helper()
	if d, ok := w.Deadline(tm); ok || d != 0 || tm.Armed() {
		t.Fatalf("timer %v armed: Deadline = %v, %v; Armed = %v", tm.Value, d, ok, tm.Armed())
	}
}

func wantLen(t *testing.T, w *timerwheel.Wheel[int], want int) {
	t.Helper()
	if got := w.Len(); got != want {
		t.Fatalf("Len() = %d, want %d", got, want)
	}
}

func TestNew(t *testing.T) {
	w := timerwheel.New[int](3*ms, 5)
	if w.Tick() != 3*ms {
		t.Fatalf("Tick() = %v", w.Tick())
	}
	wantLen(t, w, 0)
	for _, tick := range []time.Duration{0, -ms} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New(%v, 8) did not panic", tick)
				}
			}()
			timerwheel.New[int](tick, 8)
		}()
	}
	// Degenerate ring sizes still work: every timer shares the one slot.
	for _, slots := range []int{-1, 0, 1} {
		w := timerwheel.New[int](ms, slots)
		ts := newTimers(3)
		w.Schedule(&ts[0], 1*ms)
		w.Schedule(&ts[1], 2*ms)
		w.Schedule(&ts[2], 7*ms)
		var r recorder
		wantFired(t, 2*ms, r.advance(w, 2*ms), 0, 1)
		wantFired(t, 6*ms, r.advance(w, 6*ms))
		wantFired(t, 7*ms, r.advance(w, 7*ms), 2)
	}
}

func TestZeroTimerIsStopped(t *testing.T) {
	w := timerwheel.New[int](ms, 8)
	var tm timerwheel.Timer[int]
	wantStopped(t, w, &tm)
	w.Stop(&tm)
	w.Stop(&tm)
	wantStopped(t, w, &tm)
	wantLen(t, w, 0)
}

func TestDeadlineOnTickBoundary(t *testing.T) {
	w := timerwheel.New[int](ms, 8)
	ts := newTimers(1)
	w.Schedule(&ts[0], 5*ms)
	wantDeadline(t, w, &ts[0], 5*ms)
	var r recorder
	wantFired(t, 5*ms-1, r.advance(w, 5*ms-1))
	wantDeadline(t, w, &ts[0], 5*ms)
	wantFired(t, 5*ms, r.advance(w, 5*ms), 0)
	wantStopped(t, w, &ts[0])
	wantLen(t, w, 0)
	wantFired(t, 100*ms, r.advance(w, 100*ms)) // fires once only
}

func TestDeadlineRoundedUp(t *testing.T) {
	for _, off := range []time.Duration{1, ms / 2, ms - 1} {
		w := timerwheel.New[int](ms, 8)
		ts := newTimers(1)
		w.Schedule(&ts[0], 5*ms+off)
		wantDeadline(t, w, &ts[0], 6*ms)
		var r recorder
		wantFired(t, 5*ms+off, r.advance(w, 5*ms+off)) // the deadline itself, mid-tick: not yet
		wantFired(t, 6*ms-1, r.advance(w, 6*ms-1))
		wantFired(t, 6*ms, r.advance(w, 6*ms), 0)
	}
	// An Advance that lands mid-tick past the rounded deadline fires too.
	w := timerwheel.New[int](ms, 8)
	ts := newTimers(1)
	w.Schedule(&ts[0], 2*ms+1)
	var r recorder
	wantFired(t, 3*ms+ms/2, r.advance(w, 3*ms+ms/2), 0)
}

func TestDeadlineZero(t *testing.T) {
	w := timerwheel.New[int](ms, 8)
	ts := newTimers(1)
	w.Schedule(&ts[0], 0)
	wantDeadline(t, w, &ts[0], 0)
	var r recorder
	wantFired(t, 0, r.advance(w, 0), 0)

	// A deadline of 0 on a fresh wheel also fires at a mid-tick Advance.
	w = timerwheel.New[int](ms, 8)
	w.Schedule(&ts[0], 0)
	wantFired(t, ms/2, r.advance(w, ms/2), 0)
}

// The clock starts at zero; a negative time has reached no deadline, not even 0.
func TestNegativeNowFiresNothing(t *testing.T) {
	w := timerwheel.New[int](ms, 8)
	ts := newTimers(2)
	w.Schedule(&ts[0], 0)
	w.Schedule(&ts[1], -5*ms)
	wantDeadline(t, w, &ts[1], 0) // clamped to the wheel's clock
	var r recorder
	for _, now := range []time.Duration{-10 * ms, -ms, -1} {
		wantFired(t, now, r.advance(w, now))
	}
	wantLen(t, w, 2)
	wantFired(t, 0, r.advance(w, 0), 0, 1)
}

func TestPastDeadlineFiresAtNextAdvance(t *testing.T) {
	w := timerwheel.New[int](ms, 8)
	ts := newTimers(3)
	var r recorder
	wantFired(t, 10*ms, r.advance(w, 10*ms))
	w.Schedule(&ts[0], 3*ms)    // long past
	w.Schedule(&ts[1], 10*ms)   // the time of the last Advance
	w.Schedule(&ts[2], -100*ms) // before the clock's start
	for i := range ts {
		// The wheel has processed tick 10; the earliest it can fire is tick 11.
		wantDeadline(t, w, &ts[i], 11*ms)
	}
	wantFired(t, 11*ms, r.advance(w, 11*ms), 0, 1, 2)

	// Same after a mid-tick Advance, and with a long jump to follow.
	wantFired(t, 20*ms+ms/2, r.advance(w, 20*ms+ms/2))
	w.Schedule(&ts[0], 20*ms)
	w.Schedule(&ts[1], 20*ms+ms/2)
	wantDeadline(t, w, &ts[0], 21*ms)
	wantDeadline(t, w, &ts[1], 21*ms)
	wantFired(t, 500*ms, r.advance(w, 500*ms), 0, 1)
}

func TestRescheduleEarlierAndLater(t *testing.T) {
	w := timerwheel.New[int](ms, 8)
	ts := newTimers(1)
	var r recorder

	w.Schedule(&ts[0], 50*ms)
	w.Schedule(&ts[0], 3*ms) // earlier, another turn
	wantLen(t, w, 1)
	wantDeadline(t, w, &ts[0], 3*ms)
	wantFired(t, 2*ms, r.advance(w, 2*ms))
	wantFired(t, 3*ms, r.advance(w, 3*ms), 0)
	wantFired(t, 60*ms, r.advance(w, 60*ms)) // the old deadline is gone

	w.Schedule(&ts[0], 61*ms)
	w.Schedule(&ts[0], 90*ms) // later, several turns on
	wantLen(t, w, 1)
	wantDeadline(t, w, &ts[0], 90*ms)
	wantFired(t, 89*ms, r.advance(w, 89*ms))
	wantFired(t, 90*ms, r.advance(w, 90*ms), 0)

	// Re-arming to the same deadline, and to the same slot a turn later.
	w.Schedule(&ts[0], 95*ms)
	w.Schedule(&ts[0], 95*ms)
	w.Schedule(&ts[0], 103*ms) // 95 + 8 slots
	wantLen(t, w, 1)
	wantFired(t, 95*ms, r.advance(w, 95*ms))
	wantFired(t, 103*ms, r.advance(w, 103*ms), 0)
	wantLen(t, w, 0)
}

func TestStop(t *testing.T) {
	w := timerwheel.New[int](ms, 8)
	ts := newTimers(3)
	var r recorder
	for i := range ts {
		w.Schedule(&ts[i], time.Duration(i+1)*ms)
	}
	w.Stop(&ts[1])
	wantStopped(t, w, &ts[1])
	wantLen(t, w, 2)
	w.Stop(&ts[1]) // stopping a stopped timer does nothing
	wantLen(t, w, 2)
	wantFired(t, 10*ms, r.advance(w, 10*ms), 0, 2)
	w.Stop(&ts[0]) // stopping a fired timer does nothing
	wantLen(t, w, 0)

	// A stopped timer can be scheduled again.
	w.Schedule(&ts[1], 12*ms)
	wantLen(t, w, 1)
	wantFired(t, 12*ms, r.advance(w, 12*ms), 1)
}

// Timers that hash to one slot over several turns each fire on their own turn.
func TestManyTurnsInOneSlot(t *testing.T) {
	const slots = 8
	w := timerwheel.New[int](ms, slots)
	const n = 20
	ts := newTimers(n)
	for i := n - 1; i >= 0; i-- { // link in reverse so the list is not sorted
		w.Schedule(&ts[i], time.Duration(3+i*slots)*ms)
	}
	var r recorder
	for tick := 0; tick <= 3+n*slots; tick++ {
		now := time.Duration(tick) * ms
		got := r.advance(w, now)
		if (tick-3)%slots == 0 && tick >= 3 && (tick-3)/slots < n {
			wantFired(t, now, got, (tick-3)/slots)
		} else {
			wantFired(t, now, got)
		}
	}
	wantLen(t, w, 0)
}

func TestJumpOfTenTurns(t *testing.T) {
	const slots = 8
	const turn = slots * ms
	w := timerwheel.New[int](ms, slots)
	ts := newTimers(13 * slots)
	for i := range ts { // one timer per tick 1..13 turns
		w.Schedule(&ts[i], time.Duration(i+1)*ms)
	}
	var r recorder
	now := 10*turn + ms/2
	got := r.advance(w, now)
	var want []int
	for i := range 10 * slots { // deadlines 1ms .. 80ms
		want = append(want, i)
	}
	wantFired(t, now, got, want...)
	wantLen(t, w, 3*slots)
	for i := 10 * slots; i < len(ts); i++ {
		wantDeadline(t, w, &ts[i], time.Duration(i+1)*ms)
	}
	// The rest fire tick by tick, each exactly at its deadline.
	for i := 10 * slots; i < len(ts); i++ {
		d := time.Duration(i+1) * ms
		wantFired(t, d-1, r.advance(w, d-1))
		wantFired(t, d, r.advance(w, d), i)
	}
	wantLen(t, w, 0)
}

// A jump lands mid-turn: timers in the slots it wrapped around to that are
// due a turn later stay; a timer scheduled afterwards for a slot the jump
// covered fires only on its own turn.
func TestJumpKeepsLaterTurns(t *testing.T) {
	const slots = 8
	w := timerwheel.New[int](ms, slots)
	ts := newTimers(4)
	w.Schedule(&ts[0], 20*ms) // slot 4
	w.Schedule(&ts[1], 28*ms) // slot 4, next turn
	w.Schedule(&ts[2], 25*ms) // slot 1
	var r recorder
	wantFired(t, 23*ms, r.advance(w, 23*ms), 0)
	w.Schedule(&ts[3], 32*ms) // slot 0, already visited in this turn
	wantFired(t, 25*ms, r.advance(w, 25*ms), 2)
	wantFired(t, 31*ms, r.advance(w, 31*ms), 1)
	wantFired(t, 32*ms, r.advance(w, 32*ms), 3)
}

func TestAdvanceBackwardsIsNoop(t *testing.T) {
	w := timerwheel.New[int](ms, 8)
	ts := newTimers(1)
	var r recorder
	wantFired(t, 10*ms, r.advance(w, 10*ms))
	w.Schedule(&ts[0], 12*ms)
	wantFired(t, 5*ms, r.advance(w, 5*ms))
	wantFired(t, 10*ms, r.advance(w, 10*ms))
	wantFired(t, 11*ms, r.advance(w, 11*ms))
	wantFired(t, 12*ms, r.advance(w, 12*ms), 0)
}

func TestFarFutureDeadline(t *testing.T) {
	w := timerwheel.New[int](ms, 8)
	ts := newTimers(3)
	never := time.Duration(math.MaxInt64)
	last := never / ms * ms // the last tick boundary an Advance can reach
	w.Schedule(&ts[0], never)
	w.Schedule(&ts[1], never-ms/2)
	w.Schedule(&ts[2], last)
	wantDeadline(t, w, &ts[0], never) // saturated: its tick is beyond any time
	wantDeadline(t, w, &ts[1], never)
	wantDeadline(t, w, &ts[2], last)
	var r recorder
	for _, now := range []time.Duration{0, ms, time.Hour, 1000 * time.Hour, last - 1} {
		wantFired(t, now, r.advance(w, now))
	}
	wantFired(t, never, r.advance(w, never), 2)
	wantLen(t, w, 2)
}

func TestValueIsTheOwners(t *testing.T) {
	type session struct{ id int }
	w := timerwheel.New[*session](ms, 8)
	s := &session{id: 7}
	tm := timerwheel.Timer[*session]{Value: s}
	w.Schedule(&tm, 2*ms)
	w.Advance(2*ms, func(got *timerwheel.Timer[*session]) {
		if got != &tm || got.Value != s {
			t.Fatalf("fired %p with Value %v", got, got.Value)
		}
	})
	if tm.Value != s {
		t.Fatal("Value changed")
	}
}

func TestFiredTimerIsDisarmed(t *testing.T) {
	w := timerwheel.New[int](ms, 8)
	ts := newTimers(2)
	w.Schedule(&ts[0], ms)
	w.Schedule(&ts[1], ms)
	calls := 0
	w.Advance(ms, func(tm *timerwheel.Timer[int]) {
		calls++
		wantStopped(t, w, tm)
		w.Stop(tm) // harmless
	})
	if calls != 2 {
		t.Fatalf("fired %d timers, want 2", calls)
	}
	wantLen(t, w, 0)
}

// Whichever of two timers due in one Advance fires first stops the other,
// which then must not fire.
func TestCallbackStopsLaterDueTimer(t *testing.T) {
	for _, same := range []bool{true, false} { // one slot, or two
		w := timerwheel.New[int](ms, 8)
		ts := newTimers(3)
		w.Schedule(&ts[0], 2*ms)
		if same {
			w.Schedule(&ts[1], 2*ms)
		} else {
			w.Schedule(&ts[1], 3*ms)
		}
		w.Schedule(&ts[2], 9*ms)
		var fired []int
		w.Advance(5*ms, func(tm *timerwheel.Timer[int]) {
			fired = append(fired, tm.Value)
			w.Stop(&ts[1-tm.Value])
		})
		if len(fired) != 1 {
			t.Fatalf("same slot %v: fired %v, want one of 0 and 1", same, fired)
		}
		wantStopped(t, w, &ts[0])
		wantStopped(t, w, &ts[1])
		wantLen(t, w, 1)
		var r recorder
		wantFired(t, 20*ms, r.advance(w, 20*ms), 2)
	}
}

// A due timer that an earlier callback re-arms fires at its new deadline only.
func TestCallbackRearmsLaterDueTimer(t *testing.T) {
	for _, at := range []time.Duration{0, 5 * ms, 7 * ms, 30 * ms} {
		w := timerwheel.New[int](ms, 8)
		ts := newTimers(2)
		w.Schedule(&ts[0], 2*ms)
		w.Schedule(&ts[1], 2*ms)
		first := -1
		w.Advance(5*ms, func(tm *timerwheel.Timer[int]) {
			if first >= 0 {
				t.Fatalf("re-armed to %v: timer %v fired after %v", at, tm.Value, first)
			}
			first = tm.Value
			w.Schedule(&ts[1-first], at)
		})
		other := &ts[1-first]
		want := max(at, 6*ms) // the wheel has processed up to 5ms
		wantDeadline(t, w, other, want)
		wantLen(t, w, 1)
		var r recorder
		wantFired(t, want-1, r.advance(w, want-1))
		wantFired(t, want, r.advance(w, want), 1-first)
	}
}

// A callback that re-schedules its own timer for now (or the past) must not
// loop: the timer fires once per Advance that reaches a new tick.
func TestCallbackReschedulesSelfForNow(t *testing.T) {
	for _, now := range []time.Duration{5 * ms, 5*ms + ms/2} {
		w := timerwheel.New[int](ms, 8)
		ts := newTimers(1)
		w.Schedule(&ts[0], ms)
		calls := 0
		var at time.Duration
		rearm := func(tm *timerwheel.Timer[int]) {
			calls++
			if calls > 100 {
				t.Fatal("callback loops")
			}
			w.Schedule(tm, at)
		}
		at = now
		w.Advance(now, rearm)
		if calls != 1 {
			t.Fatalf("Advance(%v) fired %d times", now, calls)
		}
		next := (now/ms + 1) * ms
		wantDeadline(t, w, &ts[0], next)
		w.Advance(now, rearm) // the same time again
		w.Advance(next-1, rearm)
		if calls != 1 {
			t.Fatalf("fired again before the next tick: %d calls", calls)
		}
		for i := range 10 {
			now = next + time.Duration(i)*ms
			at = now - 3*ms // the past, this time
			w.Advance(now, rearm)
			if calls != 2+i {
				t.Fatalf("Advance(%v): %d calls, want %d", now, calls, 2+i)
			}
		}
		wantLen(t, w, 1)
	}
}

func TestCallbackReschedulesSelfLater(t *testing.T) {
	w := timerwheel.New[int](ms, 8)
	ts := newTimers(1)
	w.Schedule(&ts[0], ms)
	var firedAt []time.Duration
	var now time.Duration
	fire := func(tm *timerwheel.Timer[int]) {
		firedAt = append(firedAt, now)
		w.Schedule(tm, now+20*ms) // more than a turn on
	}
	for now = 0; now <= 100*ms; now += ms {
		w.Advance(now, fire)
	}
	want := []time.Duration{1 * ms, 21 * ms, 41 * ms, 61 * ms, 81 * ms}
	if !slices.Equal(firedAt, want) {
		t.Fatalf("fired at %v, want %v", firedAt, want)
	}
}

// Timers a callback schedules for a time already reached fire at the next
// Advance, whatever slot they land in.
func TestCallbackSchedulesOthers(t *testing.T) {
	w := timerwheel.New[int](ms, 8)
	ts := newTimers(4)
	w.Schedule(&ts[0], 3*ms)
	var r recorder
	w.Advance(3*ms, func(tm *timerwheel.Timer[int]) {
		r.fire(tm)
		w.Schedule(&ts[1], 0)
		w.Schedule(&ts[2], 3*ms)
		w.Schedule(&ts[3], 4*ms)
	})
	wantFired(t, 3*ms, r.fired, 0)
	wantLen(t, w, 3)
	wantFired(t, 4*ms, r.advance(w, 4*ms), 1, 2, 3)
}

func TestNoAllocations(t *testing.T) {
	w := timerwheel.New[int](ms, 64)
	ts := newTimers(256)
	var now time.Duration
	fire := func(tm *timerwheel.Timer[int]) { w.Schedule(tm, now+100*ms) }
	for i := range ts {
		w.Schedule(&ts[i], time.Duration(i)*ms)
	}
	for range 300 { // warm Advance's reused slice
		now += ms
		w.Advance(now, fire)
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		tm := &ts[i%len(ts)]
		w.Schedule(tm, now+time.Duration(i%500)*ms)
		w.Stop(&ts[(i+7)%len(ts)])
		w.Schedule(&ts[(i+7)%len(ts)], now+time.Duration(i%200)*ms)
		now += ms
		w.Advance(now, fire)
		i++
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per Schedule/Stop/Advance", allocs)
	}
}

// NextDue is never later than the earliest deadline, finds the next busy
// slot across word and ring boundaries, and reports nothing for an empty
// wheel.
func TestNextDue(t *testing.T) {
	for _, slots := range []int{1, 8, 64, 256} {
		w := timerwheel.New[int](time.Millisecond, slots)
		if _, ok := w.NextDue(); ok {
			t.Fatalf("%d slots: empty wheel reports a due time", slots)
		}
		w.Advance(5*time.Millisecond, func(*timerwheel.Timer[int]) {})
		var a, b timerwheel.Timer[int]
		for _, at := range []time.Duration{6, 7, 70, 130, 300, 1000} {
			at *= time.Millisecond
			w.Schedule(&a, at)
			w.Schedule(&b, at+3*time.Millisecond)
			due, ok := w.NextDue()
			if !ok || due > at {
				t.Fatalf("%d slots, deadline %v: NextDue %v, %v; want at most %v", slots, at, due, ok, at)
			}
		}
		w.Stop(&a)
		w.Stop(&b)
		if _, ok := w.NextDue(); ok {
			t.Fatalf("%d slots: stopped timers still reported", slots)
		}
	}
	// With a ring longer than the horizon, the answer is exact.
	w := timerwheel.New[int](time.Millisecond, 4096)
	var a timerwheel.Timer[int]
	for _, at := range []time.Duration{1, 63, 64, 65, 200, 4095} {
		w.Schedule(&a, at*time.Millisecond)
		if due, _ := w.NextDue(); due != at*time.Millisecond {
			t.Fatalf("deadline %v: NextDue %v", at*time.Millisecond, due)
		}
	}
	// Sleeping until NextDue and advancing fires every timer in time.
	var fired int
	timers := make([]timerwheel.Timer[int], 50)
	for i := range timers {
		w.Schedule(&timers[i], time.Duration(300+i*97)*time.Millisecond)
	}
	w.Stop(&a)
	for w.Len() > 0 {
		due, _ := w.NextDue()
		w.Advance(due, func(*timerwheel.Timer[int]) { fired++ })
	}
	if fired != len(timers) {
		t.Fatalf("fired %d of %d", fired, len(timers))
	}
}
