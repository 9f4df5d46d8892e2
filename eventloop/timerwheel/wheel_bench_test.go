package timerwheel_test

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/monolock/monolock/eventloop/timerwheel"
)

// The server's geometry (eventloop/owner.go).
const (
	benchTick  = time.Millisecond
	benchSlots = 4096
	benchLease = 10 * time.Second // longer than a turn of the ring (4.096s)
)

// armedPastLease returns a wheel of the server's geometry with n timers armed
// one tick apart from one lease on.
func armedPastLease(n int) (*timerwheel.Wheel[int], []timerwheel.Timer[int]) {
	w := timerwheel.New[int](benchTick, benchSlots)
	ts := newTimers(n)
	for i := range ts {
		w.Schedule(&ts[i], benchLease+time.Duration(i)*benchTick)
	}
	return w, ts
}

// BenchmarkSchedule re-arms armed timers to new deadlines, as a session
// re-arms its one timer, among 10k armed timers.
func BenchmarkSchedule(b *testing.B) {
	w, ts := armedPastLease(10_000)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		w.Schedule(&ts[i%len(ts)], benchLease+time.Duration(i%7919)*benchTick)
		i++
	}
	if w.Len() != len(ts) {
		b.Fatal(w.Len())
	}
}

// BenchmarkStopSchedule stops an armed timer and schedules it again.
func BenchmarkStopSchedule(b *testing.B) {
	w, ts := armedPastLease(10_000)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		t := &ts[i%len(ts)]
		w.Stop(t)
		w.Schedule(t, benchLease+time.Duration(i%7919)*benchTick)
		i++
	}
	if w.Len() != len(ts) {
		b.Fatal(w.Len())
	}
}

// BenchmarkAdvanceIdle advances one tick at a time past 100k timers that are
// all due many turns later: the cost of a tick that fires nothing.
func BenchmarkAdvanceIdle(b *testing.B) {
	for _, slots := range []int{benchSlots, 65536} {
		b.Run("slots="+strconv.Itoa(slots), func(b *testing.B) {
			w := timerwheel.New[int](benchTick, slots)
			ts := newTimers(100_000)
			rng := rand.New(rand.NewPCG(1, 2))
			far := time.Duration(1<<40) * benchTick // beyond any b.N ticks
			for i := range ts {
				w.Schedule(&ts[i], far+time.Duration(rng.Int64N(int64(time.Hour))))
			}
			fire := func(t *timerwheel.Timer[int]) { b.Fatalf("timer %v fired", t.Value) }
			var now time.Duration
			b.ReportAllocs()
			for b.Loop() {
				now += benchTick
				w.Advance(now, fire)
			}
			if w.Len() != len(ts) {
				b.Fatal(w.Len())
			}
		})
	}
}

// BenchmarkFireAndRearm is the lazy re-arm pattern: 10k timers with deadlines
// spread over one lease, each re-scheduled one lease later when it fires. An
// op is one tick of Advance; fires/op reports how many timers that fired.
func BenchmarkFireAndRearm(b *testing.B) {
	w := timerwheel.New[int](benchTick, benchSlots)
	ts := newTimers(10_000)
	for i := range ts {
		w.Schedule(&ts[i], time.Duration(i)*benchLease/time.Duration(len(ts)))
	}
	var now time.Duration
	fired := 0
	fire := func(t *timerwheel.Timer[int]) {
		fired++
		w.Schedule(t, now+benchLease)
	}
	for now < benchLease { // one lease first, to size Advance's reused slice
		now += benchTick
		w.Advance(now, fire)
	}
	fired = 0
	b.ReportAllocs()
	for b.Loop() {
		now += benchTick
		w.Advance(now, fire)
	}
	b.ReportMetric(float64(fired)/float64(b.N), "fires/op")
	if w.Len() != len(ts) {
		b.Fatal(w.Len())
	}
}
