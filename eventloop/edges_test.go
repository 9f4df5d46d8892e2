package eventloop

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/monolock/monolock/locktable"
	"github.com/monolock/monolock/protocol"
	"github.com/monolock/monolock/protocol/admin"
)

// startInternal starts a server for the tests that need its insides.
func startInternal(t *testing.T) *Server {
	t.Helper()
	s, err := New(Config{ListenAddress: "127.0.0.1:0", Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		<-served
	})
	return s
}

// endsOnceQueued returns a context that is live when a call first looks at
// it and has ended by the time the call waits: the call is then certainly
// queued behind a busy loop when its caller gives up.
func endsOnceQueued() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return &lateEnd{Context: ctx}
}

type lateEnd struct {
	context.Context
	looked bool
}

func (c *lateEnd) Err() error {
	if !c.looked {
		c.looked = true
		return nil
	}
	return c.Context.Err()
}

// A call whose context ends while it is still queued never runs, and is
// reported as not done; one that ran is reported as done. The loop is held
// busy by a first call so that the second is certainly queued.
func TestCallWithdrawnNeverRuns(t *testing.T) {
	s := startInternal(t)
	release := make(chan struct{})
	busy := make(chan struct{})
	go func() {
		_ = s.call(context.Background(), func(*owner) {
			close(busy)
			<-release
		})
	}()
	<-busy
	ran := make(chan struct{}, 1)
	err := s.call(endsOnceQueued(), func(*owner) { ran <- struct{}{} })
	close(release)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("call with a cancelled context: %v, want context.Canceled", err)
	}
	// The loop has moved past the withdrawn call once a later one returns.
	if err := s.call(context.Background(), func(*owner) {}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ran:
		t.Fatal("a call reported as not done ran anyway")
	default:
	}
}

// A force-release reported as failed must not happen: otherwise an
// operator's retry releases the next holder too.
func TestForceReleaseReportedFailedDoesNotHappen(t *testing.T) {
	s := startInternal(t)
	var holder *session
	if err := s.call(context.Background(), func(o *owner) {
		c := &fakeConn{h: s.handler, in: protocol.AppendAcquire(nil, 60_000, "job")}
		holder = o.open(c)
		o.traffic(holder)
	}); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	busy := make(chan struct{})
	go func() {
		_ = s.call(context.Background(), func(*owner) { close(busy); <-release })
	}()
	<-busy
	if _, _, err := s.ForceRelease(endsOnceQueued(), "job", ""); err == nil {
		t.Fatal("ForceRelease with an ended context reported success")
	}
	close(release)
	var holding bool
	if err := s.call(context.Background(), func(o *owner) { holding = o.table.Holder("job") == &holder.claim }); err != nil {
		t.Fatal(err)
	}
	if !holding {
		t.Fatal("a force-release reported as failed released the lock")
	}
}

// When the loop refuses a tick it is gone: the ticker returns an error
// instead of spinning on a deadline it can never serve.
func TestTickLoopStopsWhenTheLoopRefuses(t *testing.T) {
	var w wakeup
	w.init()
	w.set(0, 0, true) // a timer is due now
	refused := errors.New("engine in shutdown")
	ticks := 0
	done := make(chan error, 1)
	go func() {
		done <- tickLoop(&w, func() error { ticks++; return refused }, make(chan struct{}))
	}()
	select {
	case err := <-done:
		if !errors.Is(err, refused) {
			t.Fatalf("tickLoop returned %v, want the loop's refusal", err)
		}
		if ticks != 1 {
			t.Fatalf("%d ticks offered to a dead loop, want 1", ticks)
		}
	case <-time.After(5 * time.Second): // a safety net, not a timing assertion
		t.Fatal("tickLoop kept going after the loop refused a tick")
	}
}

// An event loop that stops on its own (not through Shutdown) makes Serve
// return an error, so the process exits and a supervisor restarts it.
func TestServeReturnsWhenTheLoopDies(t *testing.T) {
	s, err := New(Config{ListenAddress: "127.0.0.1:0", Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	if err := s.engine.Stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-served:
		if err == nil {
			t.Fatal("Serve returned nil after the loop died")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after the loop died")
	}
	if _, err := s.Stats(context.Background()); err == nil {
		t.Fatal("Stats answered from a dead loop")
	}
	close(s.stopAccept)
	_ = s.ln.Close()
}

// A lock listing's match function runs on the caller's goroutine: while it
// is stuck, the loop still answers.
func TestLocksMatchRunsOffTheLoop(t *testing.T) {
	s := startInternal(t)
	if err := s.call(context.Background(), func(o *owner) {
		c := &fakeConn{h: s.handler, in: protocol.AppendAcquire(nil, 60_000, "job")}
		o.traffic(o.open(c))
	}); err != nil {
		t.Fatal(err)
	}
	inMatch := make(chan struct{})
	unblock := make(chan struct{})
	listed := make(chan error, 1)
	go func() {
		_, err := s.Locks(context.Background(), admin.LockQuery{Match: func(string) bool {
			close(inMatch)
			<-unblock
			return true
		}})
		listed <- err
	}()
	<-inMatch
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // a safety net
	defer cancel()
	if _, err := s.Stats(ctx); err != nil {
		t.Fatalf("the loop did not answer while a match function ran: %v", err)
	}
	close(unblock)
	if err := <-listed; err != nil {
		t.Fatal(err)
	}
}

// While shutting down nobody is promoted, whichever of a lock's sessions
// closes first. Shutdown closes a lock's waiters before its holder (they
// sent their ACQUIREs later, and the session list keeps the latest first),
// so the rule scripts never reach this guard; here the holder closes first.
func TestRuleNoPromotionWhileShuttingDown(t *testing.T) {
	r := newRig(t, Config{})
	h, _ := r.claim("x", farLeaseMS)
	w, tok := r.claim("x", farLeaseMS)
	if tok != 0 {
		t.Fatal("the second claim was granted")
	}
	r.o.shuttingDown = true // as shutdown sets it before its closes
	_ = h.closeNow()
	if fs := w.takeReads(); len(fs) != 0 {
		t.Fatalf("a waiter was sent %s while shutting down; want nothing", framesText(fs))
	}
	if w.s.claim.State() == locktable.Holding {
		t.Fatal("a waiter was granted the lock while shutting down")
	}
}
