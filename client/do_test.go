package client

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/monolock/monolock/protocol"
)

// End-to-end tests of Do against a real server over loopback TCP.

func TestDoHoldsAcrossHeartbeats(t *testing.T) {
	c := New(Config{Address: startServer(t)})
	acks := watchAcks(c)
	var token uint64
	err := c.Do(testContext(t), "heartbeats", time.Second, func(ctx context.Context, tok uint64) error {
		token = tok
		// Five heartbeats at lease/4 span more than the lease: the hold
		// outlives the lease only because the heartbeats keep it.
		for range 5 {
			nextAck(ctx, t, acks, true)
		}
		return ctx.Err()
	})
	if err != nil {
		t.Fatalf("Do = %v", err)
	}
	if token == 0 {
		t.Fatal("token is 0")
	}
}

func TestInvalidInputFailsBeforeDialing(t *testing.T) {
	d := &countingDialer{}
	c := New(Config{Address: "127.0.0.1:1", Dialer: d})
	fn := func(context.Context, uint64) error { t.Error("fn called"); return nil }
	ctx := testContext(t)
	for _, tc := range []struct {
		name  string
		lease time.Duration
		want  error
	}{
		{strings.Repeat("n", 300), time.Second, protocol.ErrNameTooLong},
		{"", time.Second, protocol.ErrEmptyName},
		{"bad\xff", time.Second, protocol.ErrInvalidUTF8},
		{"x", 0, protocol.ErrInvalidLease},
		{"x", -time.Second, protocol.ErrInvalidLease},
		{"x", protocol.MaxLease + time.Millisecond, protocol.ErrInvalidLease},
	} {
		calls := map[string]func() error{
			"Do":      func() error { return c.Do(ctx, tc.name, tc.lease, fn) },
			"DoRetry": func() error { return c.DoRetry(ctx, tc.name, tc.lease, fn) },
			"Enqueue": func() error { _, err := c.Enqueue(ctx, tc.name, tc.lease); return err },
			"Acquire": func() error { _, err := c.Acquire(ctx, tc.name, tc.lease); return err },
			"TryAcquire": func() error {
				_, err := c.TryAcquire(ctx, tc.name, tc.lease)
				return err
			},
		}
		for call, f := range calls {
			if err := f(); !errors.Is(err, tc.want) {
				t.Errorf("%s(%.20q, %v) = %v, want %v", call, tc.name, tc.lease, err, tc.want)
			}
		}
	}
	if n := d.n.Load(); n != 0 {
		t.Fatalf("dialed %d times", n)
	}
}

// TestPromotionPushWhileBlocked: the second Do is granted by the server's push
// the moment the first returns, not by its next heartbeat.
func TestPromotionPushWhileBlocked(t *testing.T) {
	addr := startServer(t)
	first, second := New(Config{Address: addr}), New(Config{Address: addr})
	secondAcks := watchAcks(second)
	var heartbeatsBeforeGrant atomic.Int32
	heartbeatsBeforeGrant.Store(-1)
	var firstToken, secondToken uint64
	secondDone := make(chan error, 1)
	ctx := testContext(t)

	err := first.Do(ctx, "promote", 10*time.Second, func(_ context.Context, token uint64) error {
		firstToken = token
		go func() {
			secondDone <- second.Do(ctx, "promote", 10*time.Second, func(_ context.Context, token uint64) error {
				secondToken = token
				heartbeatsBeforeGrant.Store(int32(len(secondAcks)))
				return nil
			})
		}()
		nextAck(ctx, t, secondAcks, false) // the second Do is queued
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := await(t, secondDone, "second Do"); err != nil {
		t.Fatal(err)
	}
	if secondToken <= firstToken {
		t.Fatalf("tokens %d then %d; want increasing", firstToken, secondToken)
	}
	// With a 10s lease the first heartbeat is due 2.5s after the ACQUIRE.
	if n := heartbeatsBeforeGrant.Load(); n != 0 {
		t.Fatalf("%d heartbeat replies before the grant; want the grant pushed", n)
	}
}

func TestPanicInFnReleasesAndRepanics(t *testing.T) {
	addr := startServer(t)
	c := New(Config{Address: addr})
	ctx := testContext(t)
	var waiter *Lock
	recovered := func() (p any) {
		defer func() { p = recover() }()
		_ = c.Do(ctx, "panic", 10*time.Second, func(context.Context, uint64) error {
			var err error
			if waiter, err = c.Enqueue(ctx, "panic", 10*time.Second); err != nil {
				t.Fatal(err)
			}
			panic("boom")
		})
		return nil
	}()
	if recovered != "boom" {
		t.Fatalf("recovered %v, want the panic re-raised", recovered)
	}
	defer waiter.Close()
	await(t, waiter.Granted(), "grant to the waiter after the panic")
}

func TestCancelWhileWaitingReturnsAtOnce(t *testing.T) {
	addr := startServer(t)
	holder, err := New(Config{Address: addr}).Acquire(testContext(t), "cancel", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()

	c := New(Config{Address: addr})
	acks := watchAcks(c)
	ctx, cancel := context.WithCancel(testContext(t))
	done := make(chan error, 1)
	go func() {
		done <- c.Do(ctx, "cancel", 10*time.Second, func(context.Context, uint64) error {
			t.Error("fn called")
			return nil
		})
	}()
	nextAck(ctx, t, acks, false) // queued
	cancel()
	if err := await(t, done, "Do after cancel"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Do = %v, want context.Canceled", err)
	}
	select {
	case <-holder.Lost():
		t.Fatalf("the holder was disturbed: %v", holder.Err())
	default:
	}
}

// TestCancelWhileRunningIsGraceful: cancelling Do's ctx only asks fn to stop;
// the lock stays held and heartbeated until fn returns, and no error is added.
func TestCancelWhileRunningIsGraceful(t *testing.T) {
	c := New(Config{Address: startServer(t)})
	acks := watchAcks(c)
	ctx, cancel := context.WithCancel(testContext(t))
	err := c.Do(ctx, "graceful", time.Second, func(ctx context.Context, _ uint64) error {
		cancel()
		<-ctx.Done()
		if cause := context.Cause(ctx); cause != context.Canceled {
			t.Errorf("cause = %v, want context.Canceled", cause)
		}
		// Still held and heartbeating.
		for range 2 {
			nextAck(testContext(t), t, acks, true)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Do = %v, want nil", err)
	}
}

func TestShutdownWhileHoldingCancelsFn(t *testing.T) {
	srv := startServerAt(t, "127.0.0.1:0")
	c := New(Config{Address: srv.Addr().String()})
	var cause error
	err := c.Do(testContext(t), "shutdown", 10*time.Second, func(ctx context.Context, _ uint64) error {
		go func() { _ = srv.Shutdown(context.Background()) }()
		<-ctx.Done()
		cause = context.Cause(ctx)
		return nil // even a nil from fn must not hide the loss
	})
	if !errors.Is(err, protocol.ErrShuttingDown) || !errors.Is(cause, protocol.ErrShuttingDown) {
		t.Fatalf("Do = %v, fn's cause %v; want server shutting down", err, cause)
	}
	var se *ServerError
	if !errors.As(err, &se) || !se.Retryable() {
		t.Fatalf("Do = %#v, want a retryable *ServerError", err)
	}
}

func TestShutdownWhileWaiting(t *testing.T) {
	srv := startServerAt(t, "127.0.0.1:0")
	addr := srv.Addr().String()
	holder, err := New(Config{Address: addr}).Acquire(testContext(t), "shutdown", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	waiter, err := New(Config{Address: addr}).Enqueue(testContext(t), "shutdown", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close()
	if err := srv.Shutdown(testContext(t)); err != nil {
		t.Fatal(err)
	}
	for _, l := range []*Lock{holder, waiter} {
		await(t, l.Lost(), "loss at shutdown")
		if !errors.Is(l.Err(), protocol.ErrShuttingDown) {
			t.Errorf("Err = %v, want server shutting down", l.Err())
		}
	}
	select {
	case <-waiter.Granted():
		t.Fatal("the waiter was promoted during shutdown")
	default:
	}
}
