package eventloop

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/monolock/monolock/internal/testsupport/wire"
)

// A turn of the call queue serves the pending tick and at most callsPerTurn
// calls, withdrawn calls free, and asks for another turn while work is left:
// between two turns the loop polls its sockets.
func TestCallQueueServesASliceEachTurn(t *testing.T) {
	wakes := 0
	q := newCallQueue(func() { wakes++ })
	turn := 0
	var servedIn []int // the turn each call ran in, in order
	const n = 3*callsPerTurn + 1
	calls := make([]*loopCall, n)
	for i := range calls {
		calls[i] = &loopCall{fn: func(*owner) { servedIn = append(servedIn, turn) }, done: make(chan struct{})}
		if err := q.push(calls[i]); err != nil {
			t.Fatal(err)
		}
	}
	if wakes != 1 {
		t.Fatalf("%d pushes sent %d wake-ups; want 1 (one is enough until the loop turns)", n, wakes)
	}
	calls[1].state.Store(callWithdrawn) // its caller gave up
	if err := q.pushTick(); err != nil {
		t.Fatal(err)
	}
	ticks := 0
	o := newRig(t, Config{}).o
	for wakes > turn {
		turn++
		q.turn(func() { ticks++ }, o.runCall)
	}
	if ticks != 1 {
		t.Fatalf("the tick ran %d times; want 1", ticks)
	}
	perTurn := map[int]int{}
	for _, tn := range servedIn {
		perTurn[tn]++
	}
	for tn, k := range perTurn {
		if k > callsPerTurn {
			t.Errorf("turn %d served %d calls; at most %d may run between two polls", tn, k, callsPerTurn)
		}
	}
	if len(servedIn) != n-1 {
		t.Fatalf("served %d calls; want %d (all but the withdrawn one)", len(servedIn), n-1)
	}
	if want := (n - 1 + callsPerTurn - 1) / callsPerTurn; turn != want {
		t.Fatalf("%d calls took %d turns; want %d full slices", n-1, turn, want)
	}
	for i, c := range calls {
		select {
		case <-c.done:
			if i == 1 {
				t.Fatal("the withdrawn call ran")
			}
		default:
			if i != 1 {
				t.Fatalf("call %d never ran", i)
			}
		}
	}
	// An idle queue asks for nothing more.
	before := wakes
	q.turn(func() { t.Fatal("a tick nobody asked for") }, o.runCall)
	if wakes != before {
		t.Fatal("an empty turn woke the loop again")
	}
}

// A queue full of calls refuses more at once rather than grow; a stopped
// loop refuses everything.
func TestCallQueueBounds(t *testing.T) {
	q := newCallQueue(func() {})
	for range maxQueuedCalls {
		if err := q.push(&loopCall{done: make(chan struct{})}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.push(&loopCall{}); err != errCallQueueFull {
		t.Fatalf("push to a full queue: %v; want errCallQueueFull", err)
	}
	q.stop()
	if err := q.pushTick(); err != errNoLoop {
		t.Fatalf("tick after stop: %v; want errNoLoop", err)
	}
	select {
	case <-q.stopped:
	default:
		t.Fatal("stop did not release waiting callers")
	}
}

// An endless stream of calls, each queueing the next as it runs (as gnet's
// own task queue would have run them all in one drain), does not keep a
// client from being served: the loop polls its sockets between slices.
func TestSocketsAreServedUnderAStreamOfCalls(t *testing.T) {
	srv, err := New(Config{ListenAddress: "127.0.0.1:0", Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()

	var stop atomic.Bool
	var ran atomic.Int64
	var chain func(*owner)
	chain = func(*owner) {
		ran.Add(1)
		if !stop.Load() {
			_ = srv.calls.push(&loopCall{fn: chain, done: make(chan struct{})})
		}
	}
	for range 2 * callsPerTurn { // every turn has a full slice to serve
		if err := srv.calls.push(&loopCall{fn: chain, done: make(chan struct{})}); err != nil {
			t.Fatal(err)
		}
	}
	for ran.Load() < 10*callsPerTurn { // the stream is flowing
		time.Sleep(time.Millisecond)
	}

	o := wire.Options{Label: "client", Safety: 10 * time.Second}
	c, tok := wire.Holder(t, srv.Addr().String(), o, "busy", 60_000)
	c.SendHeartbeat()
	c.ExpectToken(tok)
	before := ran.Load()
	c.Close()

	stop.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if before < 10*callsPerTurn {
		t.Fatalf("only %d calls ran; the stream never flowed", before)
	}
}

// The liveness probe answers only while the loop serves sockets: not while
// a slice of work holds the loop, and again at once when it lets go, also
// after a probe abandoned half-way.
func TestProbeNeedsTheLoopToServeSockets(t *testing.T) {
	srv, err := New(Config{ListenAddress: "127.0.0.1:0", Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	probe := func(d time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		return srv.Probe(ctx)
	}
	if err := probe(10 * time.Second); err != nil {
		t.Fatalf("probe of an idle loop: %v", err)
	}

	held, release := make(chan struct{}), make(chan struct{})
	go func() {
		_ = srv.call(context.Background(), func(*owner) { close(held); <-release })
	}()
	<-held
	for range 3 { // each abandoned with its nonce still owed
		if err := probe(20 * time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("probe of a held loop: %v; want the deadline", err)
		}
	}
	close(release)
	errs := make(chan error, 4)
	for range cap(errs) {
		go func() { errs <- probe(10 * time.Second) }()
	}
	for range cap(errs) {
		if err := <-errs; err != nil {
			t.Fatalf("probe after the loop let go: %v", err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if err := probe(10 * time.Second); err == nil {
		t.Fatal("probe of a stopped server succeeded")
	}
}

// A caller whose call is still queued when the loop stops gets an error at
// once, whatever its context, and the call never runs; a stuck loop that
// never turns leaves the caller to its context.
func TestCallersOfAStoppedOrStuckLoop(t *testing.T) {
	r := newRig(t, Config{})
	s := r.srv
	s.calls = newCallQueue(func() {}) // a loop that never turns
	ran := false
	errs := make(chan error, 1)
	go func() { errs <- s.call(context.Background(), func(*owner) { ran = true }) }()
	for queued := false; !queued; { // await the call in the queue, not time
		s.calls.mu.Lock()
		queued = len(s.calls.calls) == 1
		s.calls.mu.Unlock()
	}
	s.calls.stop()
	if err := <-errs; !errors.Is(err, errNoLoop) {
		t.Fatalf("call on a stopped loop: %v; want errNoLoop", err)
	}
	if ran {
		t.Fatal("the call ran after the loop stopped")
	}

	s.calls = newCallQueue(func() {})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { errs <- s.call(ctx, func(*owner) { ran = true }) }()
	cancel()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("call on a stuck loop: %v; want its context's error", err)
	}
	s.calls.turn(func() {}, r.o.runCall) // the loop wakes at last
	if ran {
		t.Fatal("a withdrawn call ran")
	}
}
