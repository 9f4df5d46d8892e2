package gocronlock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/monolock/monolock/client"
)

// candidate is one scheduler's elector, its clock and its leadership
// changes.
type candidate struct {
	e       *Elector
	clock   *clockwork.FakeClock
	changes chan Change
}

func newCandidate(t *testing.T, srv *fakeServer, opts ...Option) candidate {
	t.Helper()
	c := candidate{clock: clockwork.NewFakeClockAt(tick), changes: make(chan Change, 16)}
	cfg := newConfig(append(opts, OnChange(func(ch Change) { c.changes <- ch }), func(cf *config) { cf.clock = c.clock }))
	e, err := newElector(context.Background(), srv, "leader", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	c.e = e
	return c
}

func (c candidate) awaitChange(t *testing.T, leader bool) Change {
	t.Helper()
	select {
	case ch := <-c.changes:
		if ch.Leader != leader {
			t.Fatalf("change %+v, want leader=%v", ch, leader)
		}
		return ch
	case <-time.After(safety):
		t.Fatalf("no change to leader=%v", leader)
		return Change{}
	}
}

// newLeader is a fake server and the candidate that leads on it.
func newLeader(t *testing.T) (*fakeServer, candidate) {
	t.Helper()
	srv := newFakeServer()
	a := newCandidate(t, srv)
	awaitAttempt(t, srv)
	a.awaitChange(t, true)
	return srv, a
}

// awaitAttempt takes the next attempt's lock name from the server.
func awaitAttempt(t *testing.T, srv *fakeServer) {
	t.Helper()
	select {
	case <-srv.attempt:
	case <-time.After(safety):
		t.Fatal("no new attempt for the leadership lock")
	}
}

func TestElectorOneLeaderAndTheNextTakesOver(t *testing.T) {
	srv := newFakeServer()
	a := newCandidate(t, srv)
	awaitAttempt(t, srv)
	ch := a.awaitChange(t, true)
	if err := a.e.IsLeader(context.Background()); err != nil {
		t.Fatalf("the first candidate: %v", err)
	}
	if h := a.e.Held(); h.Token() != ch.Token || h.LockName() != "leader" || !h.Valid() {
		t.Fatalf("Held = token %d %q, want the leadership lock's token %d", h.Token(), h.LockName(), ch.Token)
	}
	b := newCandidate(t, srv)
	awaitAttempt(t, srv)
	if err := b.e.IsLeader(context.Background()); !errors.Is(err, ErrNotLeader) || !strings.Contains(err.Error(), `"leader"`) {
		t.Fatalf("the queued candidate: %v, want ErrNotLeader naming the lock", err)
	}
	// a dies: the server hands the lock to b, which leads with a larger token.
	srv.held("leader").lose(client.ErrConnectionClosed)
	srv.mu.Lock()
	srv.dropLocked(srv.holder["leader"])
	srv.mu.Unlock()
	chb := b.awaitChange(t, true)
	if err := b.e.IsLeader(context.Background()); err != nil || chb.Token <= ch.Token {
		t.Fatalf("after a's loss b: %v, token %d (a's %d)", err, chb.Token, ch.Token)
	}
	lost := a.awaitChange(t, false)
	if !errors.Is(lost.Cause, client.ErrConnectionClosed) || a.e.IsLeader(context.Background()) == nil {
		t.Fatalf("a after its loss: change %+v, IsLeader %v", lost, a.e.IsLeader(context.Background()))
	}
	awaitAttempt(t, srv) // a queues again, at the back
}

// A leader frozen past its lease is no longer leader at its first check,
// by the clock, before the client has seen the loss.
func TestElectorFrozenLeaderStopsAtOnce(t *testing.T) {
	srv, a := newLeader(t)
	srv.held("leader").valid.Store(false) // Valid reads the clock: past 0.8 × lease
	if err := a.e.IsLeader(context.Background()); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("IsLeader of a leader whose lock is no longer valid: %v", err)
	}
}

func TestElectorCloseGivesUpLeadership(t *testing.T) {
	srv, a := newLeader(t)
	held := srv.held("leader")
	if err := a.e.Close(); err != nil {
		t.Fatal(err)
	}
	if !held.closed.Load() || srv.held("leader") != nil {
		t.Fatal("Close left the leadership lock held")
	}
	if ch := a.awaitChange(t, false); !errors.Is(ch.Cause, ErrClosed) {
		t.Fatalf("change after Close: %+v, want ErrClosed", ch)
	}
	if err := a.e.IsLeader(context.Background()); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("IsLeader after Close: %v", err)
	}
	if err := a.e.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	select {
	case name := <-srv.attempt:
		t.Fatalf("a closed elector campaigned again for %q", name)
	default:
	}
}

func TestElectorFirstAttemptErrorIsReturned(t *testing.T) {
	srv := newFakeServer()
	srv.fail = client.ErrConnectionClosed
	_, err := newElector(context.Background(), srv, "leader", newConfig(nil))
	if !errors.Is(err, client.ErrConnectionClosed) || !strings.Contains(err.Error(), `"leader"`) {
		t.Fatalf("NewElector = %v, want the cause, naming the lock", err)
	}
}

// After the first attempt, failures are retried with doubling waits.
func TestElectorRetriesWithBackoff(t *testing.T) {
	srv, a := newLeader(t)
	srv.mu.Lock()
	srv.fail = client.ErrConnectionClosed
	srv.mu.Unlock()
	srv.held("leader").expire()
	a.awaitChange(t, false)
	awaitAttempt(t, srv) // queues again at once after a lead: fails
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	for _, wait := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond} {
		if err := a.clock.BlockUntilContext(ctx, 1); err != nil {
			t.Fatal(err)
		}
		a.clock.Advance(wait - time.Nanosecond)
		select {
		case <-srv.attempt:
			t.Fatalf("retried before %v", wait)
		default:
		}
		a.clock.Advance(time.Nanosecond)
		awaitAttempt(t, srv)
	}
	srv.mu.Lock()
	srv.fail = nil
	srv.mu.Unlock()
	if err := a.clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	a.clock.Advance(800 * time.Millisecond)
	awaitAttempt(t, srv)
	a.awaitChange(t, true)
}
