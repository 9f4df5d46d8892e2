package fenced_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/monolock/monolock/fence"
	"github.com/monolock/monolock/internal/testsupport/fenced"
)

func TestWritesFollowTheFenceRule(t *testing.T) {
	base := time.Date(2038, 1, 19, 3, 14, 8, 0, time.UTC)
	tick := 0
	r := fenced.New(fenced.Options{Now: func() time.Time { tick++; return base.Add(time.Duration(tick)) }})
	ctx := context.Background()
	steps := []struct {
		lock   string
		token  uint64
		ok     bool
		before uint64 // Highest recorded
	}{
		{"a", 0, false, 0}, // never issued: refused, even first
		{"a", 5, true, 0},
		{"a", 5, true, 5}, // the same holder again
		{"a", 4, false, 5},
		{"b", 1, true, 0}, // locks are independent
		{"a", 1 << 63, true, 5},
		{"a", 1<<63 - 1, false, 1 << 63}, // unsigned: 2^63 is the larger
		{"a", 0, false, 1 << 63},
	}
	for i, s := range steps {
		w := r.Write(ctx, s.lock, fmt.Sprint("w", i), s.token)
		if w.Accepted != s.ok || w.Highest != s.before || w.Seq != i || w.Token != s.token || w.Lock != s.lock {
			t.Fatalf("step %d: Write(%q, %d) = %+v, want accepted %v with highest-before %d", i, s.lock, s.token, w, s.ok, s.before)
		}
		if !s.ok && !errors.Is(w.Err, fence.ErrStale) {
			t.Fatalf("step %d: Err = %v, want fence.ErrStale", i, w.Err)
		}
		if !w.At.Equal(base.Add(time.Duration(i + 1))) {
			t.Fatalf("step %d: At = %v, not the injected clock's", i, w.At)
		}
	}
	if acc, stale := r.Counts(); acc != 4 || stale != 4 {
		t.Fatalf("Counts = %d, %d; want 4, 4", acc, stale)
	}
	if n := len(r.Writes()); n != len(steps) {
		t.Fatalf("%d writes recorded, want %d", n, len(steps))
	}
	if of := r.Of("b"); len(of) != 1 || of[0].Seq != 4 {
		t.Fatalf("Of(b) = %+v, want the one write at seq 4", of)
	}
}

// A store shared with others: its refusal names a larger token than this
// resource admitted, and Highest says so; an error that is not a stale
// token is recorded as refused but not counted stale.
type refusing struct{ err error }

func (f refusing) Admit(context.Context, string, uint64) error { return f.err }

func TestTheStoreDecides(t *testing.T) {
	ctx := context.Background()
	r := fenced.New(fenced.Options{Store: refusing{&fence.StaleError{Resource: "a", Token: 3, Highest: 9}}})
	if w := r.Write(ctx, "a", "x", 3); w.Accepted || w.Highest != 9 {
		t.Fatalf("write = %+v, want refused below 9", w)
	}
	down := errors.New("database is down")
	r = fenced.New(fenced.Options{Store: refusing{down}})
	w := r.Write(ctx, "a", "x", 3)
	if w.Accepted || !errors.Is(w.Err, down) {
		t.Fatalf("write = %+v, want refused with the store's error", w)
	}
	if _, stale := r.Counts(); stale != 0 {
		t.Fatalf("a store error counted as %d stale writes", stale)
	}
}

func TestWrittenIsClosedAtTheFirstAttempt(t *testing.T) {
	r := fenced.New(fenced.Options{})
	ch := r.Written("old")
	select {
	case <-ch:
		t.Fatal("closed before any write")
	default:
	}
	r.Write(context.Background(), "a", "next", 1)
	select {
	case <-ch:
		t.Fatal("closed by another writer's write")
	default:
	}
	r.Write(context.Background(), "a", "old", 0) // refused still counts as an attempt
	<-ch
	r.Write(context.Background(), "a", "old", 2) // a second write does not close it again
	<-r.Written("old")
}

// Concurrent writers with interleaved tokens, under the race detector: in
// the recorded order the accepted tokens never go down, and every refused
// one is below the highest before it.
func TestConcurrentHistoryIsOrdered(t *testing.T) {
	r := fenced.New(fenced.Options{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 1; i <= 200; i++ {
				tok := uint64(i*8 + w)
				if i%7 == 0 {
					tok -= 40
				}
				r.Write(context.Background(), []string{"x", "y"}[i%2], fmt.Sprint(w), tok)
			}
		}()
	}
	wg.Wait()
	ws := r.Writes()
	if len(ws) != 1600 {
		t.Fatalf("%d writes, want 1600", len(ws))
	}
	hi := map[string]uint64{}
	refused := 0
	for i, w := range ws {
		if w.Seq != i || w.Highest != hi[w.Lock] {
			t.Fatalf("write %d: %+v, want seq %d and highest-before %d", i, w, i, hi[w.Lock])
		}
		if w.Accepted != (w.Token >= hi[w.Lock]) {
			t.Fatalf("write %d: %+v decided against the rule", i, w)
		}
		if w.Accepted {
			hi[w.Lock] = w.Token
		} else {
			refused++
		}
	}
	if _, stale := r.Counts(); refused == 0 || stale != refused {
		t.Fatalf("%d refused, %d counted stale; want equal and not 0", refused, stale)
	}
}

// blockingStore is a fence.Memory whose admits for one lock wait until
// released.
type blockingStore struct {
	fence.Memory
	lock    string
	entered chan struct{}
	release chan struct{}
}

func (s *blockingStore) Admit(ctx context.Context, lock string, token uint64) error {
	if lock == s.lock {
		s.entered <- struct{}{}
		<-s.release
	}
	return s.Memory.Admit(ctx, lock, token)
}

// A write whose store is slow holds up no write on another lock (with one
// mutex for all locks this test never ends), and the next write on its own
// lock is decided after it.
func TestAttemptsWaitOnlyForTheirLock(t *testing.T) {
	store := &blockingStore{lock: "slow", entered: make(chan struct{}), release: make(chan struct{})}
	r := fenced.New(fenced.Options{Store: store})
	ctx := context.Background()
	first := make(chan fenced.Write)
	go func() { first <- r.Write(ctx, "slow", "old", 5) }()
	<-store.entered // the first write is inside the store

	if w := r.Write(ctx, "other", "x", 1); !w.Accepted || w.Seq != 0 {
		t.Fatalf("write on another lock = %+v, want accepted first", w)
	}
	close(store.release)
	w1 := <-first
	go func() { <-store.entered }() // the second write's turn in the store
	w2 := r.Write(ctx, "slow", "new", 3)
	if !w1.Accepted || w1.Seq != 1 || w2.Accepted || w2.Seq != 2 || w2.Highest != 5 {
		t.Fatalf("slow lock's writes %+v then %+v; want 5 accepted, then 3 refused below 5", w1, w2)
	}
}
