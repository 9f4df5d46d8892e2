package eventloop

import (
	"context"
	"testing"

	"github.com/monolock/monolock/protocol/admin"
)

// The admin reads' rules are scripts (testdata/rules/admin_reads.txt); what
// is left here needs two readers at once.

// loopRig is a rig whose loop the test plays (rig.serve), so that it can
// change the table between two slices of call work.
type loopRig struct{ *rig }

func newLoopRig(t *testing.T) *loopRig { return &loopRig{newRig(t, Config{})} }

// turnUntil serves the call queue, one turn per wake-up, until done is
// closed; between turns it runs between(calls so far).
func (r *loopRig) turnUntil(done <-chan struct{}, between func(calls int)) { r.serve(done, between) }

// lockAsync reads name through the Server on another goroutine.
func (r *loopRig) lockAsync(ctx context.Context, name string) (*admin.LockInfo, *bool, <-chan struct{}) {
	var info admin.LockInfo
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

func (r *loopRig) expectWaiters(info *admin.LockInfo, want []peer) {
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
