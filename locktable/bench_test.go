package locktable_test

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/monolock/monolock/locktable"
)

// Benchmarks that claim 0 allocs/op allocate their claims and the lock name
// before the timed loop, as the event loop does (claims live in sessions, the
// name is decoded once per session).

var benchNow = time.Unix(1_700_000_000, 0)

// BenchmarkAcquireReleaseFree is the uncontended fast path: grant on a free
// lock, then release it, so the lock is created and forgotten every time.
// The free list makes this 0 allocs/op.
func BenchmarkAcquireReleaseFree(b *testing.B) {
	b.ReportAllocs()
	tb := locktable.New[*session]()
	name := "bench-lock"
	c := new(locktable.Claim[*session])
	for b.Loop() {
		tb.Acquire(c, name, benchNow)
		tb.Release(c, benchNow)
	}
}

// BenchmarkHandover is contention between two sessions: the holder releases,
// the waiter is promoted with a fresh token, and the old holder queues again.
func BenchmarkHandover(b *testing.B) {
	b.ReportAllocs()
	tb := locktable.New[*session]()
	name := "bench-lock"
	h, w := new(locktable.Claim[*session]), new(locktable.Claim[*session])
	tb.Acquire(h, name, benchNow)
	tb.Acquire(w, name, benchNow)
	for b.Loop() {
		p := tb.Release(h, benchNow)
		tb.Acquire(h, name, benchNow)
		h = p
	}
	if tb.Holder(name) != h {
		b.Fatal("handover lost track of the holder")
	}
}

// batch is how many claims BenchmarkEnqueue and BenchmarkRemoveWaiter cycle
// through before resetting the queue with the timer stopped.
const batch = 4096

// BenchmarkEnqueue measures queueing a waiter behind a held lock.
func BenchmarkEnqueue(b *testing.B) {
	b.ReportAllocs()
	tb := locktable.New[*session]()
	name := "bench-lock"
	tb.Acquire(new(locktable.Claim[*session]), name, benchNow)
	ws := make([]locktable.Claim[*session], batch)
	i := 0
	for b.Loop() {
		if i == batch {
			b.StopTimer()
			for j := range ws {
				tb.Release(&ws[j], benchNow)
			}
			i = 0
			b.StartTimer()
		}
		tb.Acquire(&ws[i], name, benchNow)
		i++
	}
}

// BenchmarkRemoveWaiter measures a waiter leaving from a random position in
// a queue of up to batch waiters.
func BenchmarkRemoveWaiter(b *testing.B) {
	b.ReportAllocs()
	tb := locktable.New[*session]()
	name := "bench-lock"
	tb.Acquire(new(locktable.Claim[*session]), name, benchNow)
	ws := make([]locktable.Claim[*session], batch)
	order := rand.New(rand.NewPCG(1, 2)).Perm(batch)
	i := batch
	for b.Loop() {
		if i == batch {
			b.StopTimer()
			for j := range ws {
				tb.Acquire(&ws[j], name, benchNow)
			}
			i = 0
			b.StartTimer()
		}
		tb.Release(&ws[order[i]], benchNow)
		i++
	}
}

// BenchmarkQueueChurn empties queues of growing size by releasing every
// waiter in random order and reports the cost per departure. Removal is O(1),
// so ns/departure must stay roughly flat as the queue grows (cache effects
// aside); a list that searched for the waiter would grow linearly.
func BenchmarkQueueChurn(b *testing.B) {
	for _, n := range []int{1000, 10000, 50000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			tb := locktable.New[*session]()
			name := "bench-lock"
			tb.Acquire(new(locktable.Claim[*session]), name, benchNow)
			ws := make([]locktable.Claim[*session], n)
			rng := rand.New(rand.NewPCG(uint64(n), 3))
			order := make([]int, n)
			rounds := 0
			for b.Loop() {
				b.StopTimer()
				for j := range ws {
					tb.Acquire(&ws[j], name, benchNow)
					order[j] = j
				}
				rng.Shuffle(n, func(i, j int) { order[i], order[j] = order[j], order[i] })
				b.StartTimer()
				for _, j := range order {
					tb.Release(&ws[j], benchNow)
				}
				rounds++
			}
			if tb.QueueLen(name) != 0 {
				b.Fatal("queue not emptied")
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(rounds*n), "ns/departure")
		})
	}
}
