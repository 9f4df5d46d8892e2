package client

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/monolock/monolock/internal/testsupport/faultproxy"
)

// Tests that put a faultproxy between the client and a real server.

func startProxy(t *testing.T, target string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// TestFrozenRepliesCancelWork: with replies frozen, the work is cancelled and
// Do reports ErrHeartbeatTimeout. When (0.8 × lease after the newest answered
// send) is the step scripts' business (protocol/testdata/step/giveup.txt); that it comes
// before the server could hand the lock on is checked against the server
// itself by TestFrozenHolderStopsBeforeHandover.
func TestFrozenRepliesCancelWork(t *testing.T) {
	const lease = 500 * time.Millisecond
	proxy := startProxy(t, startServer(t))
	c := New(Config{Address: proxy.Addr()})
	acks := watchAcks(c)
	var cause error
	err := c.Do(testContext(t), "freeze", lease, func(ctx context.Context, _ uint64) error {
		nextAck(ctx, t, acks, true)
		proxy.Freeze(faultproxy.ServerToClient)
		<-ctx.Done()
		cause = context.Cause(ctx)
		return nil
	})
	if !errors.Is(err, ErrHeartbeatTimeout) || !errors.Is(cause, ErrHeartbeatTimeout) {
		t.Fatalf("Do = %v, fn's cause %v; want ErrHeartbeatTimeout", err, cause)
	}
}

// TestFrozenHolderStopsBeforeHandover: a holder cut off in both directions
// has been told to stop its work when the server's lease expiry hands the
// lock to a waiter.
func TestFrozenHolderStopsBeforeHandover(t *testing.T) {
	const lease = 2 * time.Second // the margin is 0.2 × lease: room for a stalling machine
	addr := startServer(t)
	proxy := startProxy(t, addr)
	holder := New(Config{Address: proxy.Addr()})
	acks := watchAcks(holder)
	ctx := testContext(t)

	// Receives, at the handover, whether the holder's work had been told to stop.
	handover := make(chan bool, 1)
	var waiter *Lock
	err := holder.Do(ctx, "partition", lease, func(work context.Context, _ uint64) error {
		var err error
		if waiter, err = New(Config{Address: addr}).Enqueue(ctx, "partition", 10*time.Second); err != nil {
			return err
		}
		go func() {
			select {
			case <-waiter.Granted():
				handover <- work.Err() != nil
			case <-waiter.Lost():
			}
		}()
		nextAck(work, t, acks, true)
		proxy.Freeze(faultproxy.Both)
		if stopped := await(t, handover, "handover by lease expiry"); !stopped {
			t.Error("the server handed the lock on while the holder's work had not been told to stop")
		}
		return nil
	})
	if waiter != nil {
		defer waiter.Close()
	}
	if !errors.Is(err, ErrHeartbeatTimeout) {
		t.Fatalf("Do = %v, want ErrHeartbeatTimeout", err)
	}
}

// TestRTTShortensTheInterval: delay through the proxy shortens the heartbeat
// interval by twice the smoothed RTT, and it never exceeds lease/4, also after
// the delay goes. Every interval the session uses is exactly what the pure
// schedule computes from the RTTs the session measured; the only bound on
// time is that an RTT through the proxy is at least twice its delay.
func TestRTTShortensTheInterval(t *testing.T) {
	const (
		lease = time.Second
		base  = lease / 4
		delay = 20 * time.Millisecond
	)
	proxy := startProxy(t, startServer(t))
	proxy.SetDelay(delay)
	c := New(Config{Address: proxy.Addr()})
	acks := watchAcks(c)
	l, err := c.Acquire(testContext(t), "rtt", lease)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	model := newHeartbeatSchedule(lease)
	check := func(e ackEvent) {
		t.Helper()
		model.observe(e.RTT)
		if e.Interval != model.interval() || e.SmoothedRTT != model.smoothedRTT() {
			t.Fatalf("ack %+v; the schedule says interval %v, smoothed RTT %v", e, model.interval(), model.smoothedRTT())
		}
		if e.Interval > base || e.Interval < min(100*time.Millisecond, base) {
			t.Fatalf("interval %v outside [100ms, %v]", e.Interval, base)
		}
	}
	check(nextAck(l.Context(), t, acks, false))
	var shortest time.Duration = base
	for range 3 {
		e := nextAck(l.Context(), t, acks, true)
		check(e)
		if e.RTT < 2*delay {
			t.Fatalf("RTT %v through a %v proxy delay each way", e.RTT, delay)
		}
		shortest = min(shortest, e.Interval)
	}
	if shortest > base-4*delay {
		t.Fatalf("interval %v with RTT ≥ %v; want at most %v", shortest, 2*delay, base-4*delay)
	}
	// Without the delay the average decays, the interval grows back towards
	// lease/4 (how fast is the pure schedule's business, tested there) and
	// never beyond it.
	proxy.SetDelay(0)
	for range 3 {
		check(nextAck(l.Context(), t, acks, true))
	}
}

// TestOneWayFreezeStopsBeforeHandover: only the server's answers are lost, so
// the client's frames, its close included, still reach the server. The waiter
// is granted the lock only after the holder's work has returned, because the
// client closes only then (that it keeps the connection while the work runs,
// up to the lease after its last write, is tested by protocol/testdata/step/giveup.txt).
func TestOneWayFreezeStopsBeforeHandover(t *testing.T) {
	const lease = time.Second
	addr := startServer(t)
	proxy := startProxy(t, addr)
	holder := New(Config{Address: proxy.Addr()})
	acks := watchAcks(holder)
	ctx := testContext(t)

	// Receives, at the handover, whether the holder's work had returned.
	handover := make(chan bool, 1)
	var returned atomic.Bool
	var waiter *Lock
	err := holder.Do(ctx, "one-way", lease, func(ctx context.Context, _ uint64) error {
		var err error
		if waiter, err = New(Config{Address: addr}).Enqueue(ctx, "one-way", 10*time.Second); err != nil {
			return err
		}
		nextAck(ctx, t, acks, true)
		proxy.Freeze(faultproxy.ServerToClient)
		go func() {
			select {
			case <-waiter.Granted():
				handover <- returned.Load()
			case <-waiter.Lost():
			}
		}()
		<-ctx.Done()
		returned.Store(true)
		return nil
	})
	if waiter != nil {
		defer waiter.Close()
	}
	if !errors.Is(err, ErrHeartbeatTimeout) {
		t.Fatalf("Do = %v, want ErrHeartbeatTimeout", err)
	}
	if !await(t, handover, "handover") {
		t.Fatal("the waiter was granted the lock before the holder's work returned")
	}
}
