package eventloop

import (
	"testing"
	"time"

	"github.com/monolock/monolock/protocol"
)

// countEvictions is a Metrics that counts evictions only.
type countEvictions struct {
	noMetrics
	n int
}

func (m *countEvictions) Evicted() { m.n++ }

// evict runs one eviction and checks whether it closed anyone and, when
// not, the wait it reported.
func (r *rig) evict(wantEvicted bool, wantWait time.Duration) {
	r.t.Helper()
	var evicted bool
	var wait time.Duration
	r.turnOf(func() { evicted, wait = r.o.evictPending() })
	if evicted != wantEvicted || wait != wantWait {
		r.t.Fatalf("at %v: evictPending = %v, %v; want %v, %v", r.now(), evicted, wait, wantEvicted, wantWait)
	}
}

// At the descriptor limit the session that has waited longest for its
// ACQUIRE goes first, whatever it sent meanwhile; a holder and a waiter
// (ACQUIRE done) never go, however old.
func TestRuleEvictOldestPendingFirst(t *testing.T) {
	m := &countEvictions{}
	r := newRig(t, Config{IOTimeout: time.Hour, Metrics: m})
	holder, _ := r.claim("job", farLeaseMS)
	waiter, _ := r.claim("job", farLeaseMS)
	r.run(10 * ms)
	silent := r.peer()
	r.run(10 * ms)
	partial := r.peer()
	r.send(partial.fakeConn, protocol.AppendAcquire(nil, 10_000, "late")[:5])
	r.run(10 * ms)
	late := r.peer() // sends its ACQUIRE after others were accepted
	r.run(10 * ms)
	young := r.peer()
	r.send(late.fakeConn, protocol.AppendAcquire(nil, farLeaseMS, "other"))
	if tok := r.state(late); tok == 0 {
		t.Fatal("late: want ACQUIRED of a free lock")
	}

	r.run(evictGrace) // every one is past the grace now
	r.evict(true, 0)
	r.expectClosed(silent, ReleaseIOTimeout, 0, r.now())
	r.expectOpen(partial, "the second oldest pending session after one eviction")
	r.evict(true, 0)
	r.expectClosed(partial, ReleaseIOTimeout, 0, r.now())
	r.evict(true, 0)
	r.expectClosed(young, ReleaseIOTimeout, 0, r.now())
	r.evict(false, 0)
	for _, p := range []peer{holder, waiter, late} {
		r.expectOpen(p, "a session whose ACQUIRE is done")
		r.quiet(p, "a session whose ACQUIRE is done")
	}
	r.expectQueue("job", holder, waiter)
	if m.n != 3 {
		t.Fatalf("Evicted counted %d times, want 3", m.n)
	}
	if r.o.pending.len != 0 {
		t.Fatalf("%d sessions left in the pending list, want 0", r.o.pending.len)
	}
}

// A session younger than the grace is never evicted: the owner says how
// long until it may be, and evicts it from then on.
func TestRuleEvictGrace(t *testing.T) {
	r := newRig(t, Config{IOTimeout: time.Hour})
	r.evict(false, 0) // nobody at all
	old := r.peer()
	r.run(evictGrace / 2)
	fresh := r.peer()
	r.run(evictGrace/2 - 1)
	r.evict(false, 1)
	r.expectOpen(old, "a session one ns short of the grace")
	r.run(1)
	r.evict(true, 0)
	r.expectClosed(old, ReleaseIOTimeout, 0, r.now())
	r.evict(false, evictGrace/2)
	r.expectOpen(fresh, "a session half the grace old")
	r.run(evictGrace/2 - 1)
	r.evict(false, 1)
	r.run(1)
	r.evict(true, 0)
	r.expectClosed(fresh, ReleaseIOTimeout, 0, r.now())
}

// A session leaves the pending list with its ACQUIRE or when it closes, in
// whatever order: the list stays consistent and only holds sessions
// without ACQUIRE.
func TestRuleEvictListUpkeep(t *testing.T) {
	r := newRig(t, Config{IOTimeout: time.Hour})
	peers := make([]peer, 6)
	for i := range peers {
		peers[i] = r.peer()
	}
	_ = peers[2].closeNow()                                                 // from the middle
	_ = peers[0].closeNow()                                                 // the head
	r.send(peers[5].fakeConn, protocol.AppendAcquire(nil, farLeaseMS, "a")) // the tail
	r.send(peers[3].fakeConn, protocol.AppendAcquire(nil, farLeaseMS, "b")) // the middle
	r.send(peers[3].fakeConn, heartbeat)                                    // still registered: no change
	if r.o.pending.len != 2 || r.o.pending.head != peers[1].s || r.o.pending.tail != peers[4].s {
		t.Fatalf("pending list: len %d, want peers 1 and 4 in order", r.o.pending.len)
	}
	_ = peers[5].closeNow() // a holder closing leaves the list alone
	r.run(evictGrace)
	r.evict(true, 0)
	r.evict(true, 0)
	r.evict(false, 0)
	r.expectClosed(peers[1], ReleaseIOTimeout, 0, r.now())
	r.expectClosed(peers[4], ReleaseIOTimeout, 0, r.now())
	r.expectOpen(peers[3], "a holder")
	if r.o.pending.head != nil || r.o.pending.tail != nil || r.o.pending.len != 0 {
		t.Fatal("pending list not empty after every pending session left")
	}
}
