package eventloop

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/monolock/monolock/protocol"
)

// loopRig is a rig whose Server serves its call queue only when the test
// turns it, so the test plays the loop and can change the table between two
// slices of call work.
type loopRig struct {
	*rig
	srv   *Server
	wakes chan struct{}
	calls int // calls run so far
}

func newLoopRig(t *testing.T) *loopRig {
	r := &loopRig{rig: newRig(t, Config{}), wakes: make(chan struct{}, 4)}
	r.srv = &Server{handler: &handler{owner: r.o}}
	r.srv.calls = newCallQueue(func() { r.wakes <- struct{}{} })
	return r
}

// turnUntil serves the call queue, one turn per wake-up, until done is
// closed; between turns it runs between(calls so far).
func (r *loopRig) turnUntil(done <-chan struct{}, between func(calls int)) {
	for {
		select {
		case <-r.wakes:
			r.srv.calls.turn(r.o.tick, func(c *loopCall) { r.calls++; r.o.runCall(c) })
			between(r.calls)
		case <-done:
			return
		}
	}
}

// lockAsync reads name through the Server on another goroutine.
func (r *loopRig) lockAsync(ctx context.Context, name string) (*LockInfo, *bool, <-chan struct{}) {
	var info LockInfo
	var ok bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		var err error
		if info, ok, err = r.srv.Lock(ctx, name); err != nil {
			r.t.Errorf("Lock: %v", err)
		}
	}()
	return &info, &ok, done
}

func (r *loopRig) expectWaiters(info *LockInfo, want []peer) {
	r.t.Helper()
	if len(info.Waiters) != len(want) {
		r.t.Fatalf("read %d waiters; want %d", len(info.Waiters), len(want))
	}
	for i, w := range want {
		if got := info.Waiters[i].RemoteAddr; got != w.RemoteAddr().String() {
			r.t.Fatalf("waiter %d is %s; want %s", i, got, w.RemoteAddr())
		}
	}
}

// A long queue is read one piece of at most snapshotTurn sessions per call,
// each call a turn of its own, and comes out whole and in order.
func TestRuleLongQueueIsReadInPieces(t *testing.T) {
	r := newLoopRig(t)
	h, tok := r.claim("q", farLeaseMS)
	ws := make([]peer, 3*snapshotTurn+5)
	for i := range ws {
		ws[i], _ = r.claim("q", farLeaseMS)
	}
	info, ok, done := r.lockAsync(t.Context(), "q")
	r.turnUntil(done, func(int) {})
	if !*ok || info.Holder.Token != tok || info.Holder.RemoteAddr != h.RemoteAddr().String() {
		t.Fatalf("Lock = %+v, %v; want held by %v with token %d", info.Holder, *ok, h, tok)
	}
	r.expectWaiters(info, ws)
	if want := (1 + len(ws) + snapshotTurn - 1) / snapshotTurn; r.calls != want {
		t.Fatalf("the read took %d calls; want %d of at most %d sessions each", r.calls, want, snapshotTurn)
	}
}

// Between two pieces the queue moves: a waiter that joins is listed at the
// end; if the lock changes hands, the new holder is shown and not listed as
// a waiter; if the waiter the last piece ended at leaves, the reading starts
// over and shows the queue as it is then.
func TestRuleQueueMovingBetweenPieces(t *testing.T) {
	t.Run("joins", func(t *testing.T) {
		r := newLoopRig(t)
		r.claim("q", farLeaseMS)
		ws := make([]peer, 2*snapshotTurn)
		for i := range ws {
			ws[i], _ = r.claim("q", farLeaseMS)
		}
		info, _, done := r.lockAsync(t.Context(), "q")
		r.turnUntil(done, func(calls int) {
			if calls == 1 {
				late, _ := r.claim("q", farLeaseMS)
				ws = append(ws, late)
			}
		})
		r.expectWaiters(info, ws)
	})
	t.Run("the last waiter read leaves", func(t *testing.T) {
		r := newLoopRig(t)
		r.claim("q", farLeaseMS)
		ws := make([]peer, 2*snapshotTurn)
		for i := range ws {
			ws[i], _ = r.claim("q", farLeaseMS)
		}
		info, _, done := r.lockAsync(t.Context(), "q")
		r.turnUntil(done, func(calls int) {
			if calls == 1 { // the first piece ended at waiter snapshotTurn-2
				left := snapshotTurn - 2
				_ = ws[left].closeNow()
				ws = append(ws[:left], ws[left+1:]...)
			}
		})
		r.expectWaiters(info, ws)
	})
	t.Run("changes hands", func(t *testing.T) {
		r := newLoopRig(t)
		h, _ := r.claim("q", farLeaseMS)
		ws := make([]peer, 2*snapshotTurn)
		for i := range ws {
			ws[i], _ = r.claim("q", farLeaseMS)
		}
		info, _, done := r.lockAsync(t.Context(), "q")
		r.turnUntil(done, func(calls int) {
			if calls == 1 {
				_ = h.closeNow()
			}
		})
		if info.Holder.RemoteAddr != ws[0].RemoteAddr().String() {
			t.Fatalf("holder %s; want the promoted %v", info.Holder.RemoteAddr, ws[0])
		}
		r.expectWaiters(info, ws[1:])
		if r.calls != 3 { // the holder and 127 waiters a piece: no new start
			t.Fatalf("the read took %d calls; want 3, resuming across the change of hands", r.calls)
		}
	})
}

// Reads of one lock that overlap share one reading: the loop walks the
// queue once for all of them, and each gets the whole answer.
func TestRuleConcurrentReadsShareOneReading(t *testing.T) {
	r := newLoopRig(t)
	r.claim("q", farLeaseMS)
	ws := make([]peer, 2*snapshotTurn)
	for i := range ws {
		ws[i], _ = r.claim("q", farLeaseMS)
	}
	first, _, done1 := r.lockAsync(t.Context(), "q")
	<-r.wakes // the first reading has queued its first call
	second, _, done2 := r.lockAsync(t.Context(), "q")
	for joined := false; !joined; { // await the second reader joining, not time
		r.srv.reads.mu.Lock()
		joined = r.srv.reads.inFlight["q"].callers == 2
		r.srv.reads.mu.Unlock()
	}
	r.wakes <- struct{}{}
	r.turnUntil(done1, func(int) {})
	<-done2
	r.expectWaiters(first, ws)
	r.expectWaiters(second, ws)
	if want := (1 + len(ws) + snapshotTurn - 1) / snapshotTurn; r.calls != want {
		t.Fatalf("two overlapping reads took %d calls; one reading takes %d", r.calls, want)
	}
	if &first.Waiters[0] == &second.Waiters[0] {
		t.Fatal("the readers share one slice; each must own its answer")
	}
}

// The names of a listing are read in calls of at most namesPerCall, and
// the listing has every held lock once, in order.
func TestRuleListingReadsNamesInPieces(t *testing.T) {
	r := newLoopRig(t)
	const n = 2*namesPerCall + 3
	for i := range n {
		r.claim(fmt.Sprintf("lock-%06d", i), farLeaseMS)
	}
	var got []LockInfo
	done := make(chan struct{})
	go func() {
		defer close(done)
		var err error
		if got, err = r.srv.Locks(t.Context(), func(name string) bool { return strings.HasSuffix(name, "7") }); err != nil {
			t.Errorf("Locks: %v", err)
		}
	}()
	r.turnUntil(done, func(int) {})
	if want := (n + 2) / 10; len(got) != want { // 7, 17, …: the names ending in 7
		t.Fatalf("listed %d locks; want %d", len(got), want)
	}
	for i, l := range got {
		if want := fmt.Sprintf("lock-%06d", 10*i+7); l.Name != want {
			t.Fatalf("lock %d is %s; want %s", i, l.Name, want)
		}
	}
	// 3 calls of names, then the details of the matches, snapshotTurn sessions a call.
	if want := 3 + (len(got)+snapshotTurn-1)/snapshotTurn; r.calls != want {
		t.Fatalf("the listing took %d calls; want %d", r.calls, want)
	}
}

// KickWaiter searches a long queue kickPerCall waiters a call; when the
// waiter a call ended at leaves, the search starts over and still finds its
// target.
func TestRuleKickSearchesInPieces(t *testing.T) {
	for _, leaves := range []bool{false, true} {
		t.Run(fmt.Sprintf("a waiter leaves: %v", leaves), func(t *testing.T) {
			r := newLoopRig(t)
			r.claim("q", farLeaseMS)
			ws := make([]peer, 2*kickPerCall+5)
			for i := range ws {
				ws[i], _ = r.claim("q", farLeaseMS)
			}
			target := ws[len(ws)-1]
			var ok bool
			done := make(chan struct{})
			go func() {
				defer close(done)
				var err error
				if ok, err = r.srv.KickWaiter(t.Context(), "q", target.RemoteAddr().String()); err != nil {
					t.Errorf("KickWaiter: %v", err)
				}
			}()
			r.turnUntil(done, func(calls int) {
				if leaves && calls == 1 {
					_ = ws[kickPerCall-1].closeNow()
				}
			})
			if !ok {
				t.Fatal("the last waiter was not found")
			}
			r.expectError(target, protocol.CodeClosedByAdmin)
			want := 3
			if leaves {
				want = 1 + 1 + 3 // a piece, the call that finds it moved, the search again
			}
			if r.calls != want {
				t.Fatalf("the search took %d calls; want %d of at most %d waiters", r.calls, want, kickPerCall)
			}
		})
	}
}
