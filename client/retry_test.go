package client

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/monolock/monolock/protocol"
)

// TestDoRetryReconnectsAfterRestart: a waiter told "server shutting down"
// reconnects, rides out the refused dials while the server is down, and runs
// fn exactly once on the restarted server at the same address.
func TestDoRetryReconnectsAfterRestart(t *testing.T) {
	first := startServerAt(t, "127.0.0.1:0")
	addr := first.Addr().String()
	ctx := testContext(t)
	holder, err := New(Config{Address: addr}).Acquire(ctx, "restart", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()

	c := New(Config{Address: addr})
	acks := watchAcks(c)
	var calls atomic.Int32
	done := make(chan error, 1)
	go func() {
		done <- c.DoRetry(ctx, "restart", 10*time.Second, func(context.Context, uint64) error {
			calls.Add(1)
			return nil
		})
	}()
	nextAck(ctx, t, acks, false) // queued behind the holder on the first server
	if err := first.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	await(t, holder.Lost(), "holder's loss at shutdown")
	startServerAt(t, addr)

	if err := await(t, done, "DoRetry"); err != nil {
		t.Fatalf("DoRetry = %v", err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("fn ran %d times, want once", n)
	}
	nextAck(ctx, t, acks, false) // the ACQUIRE's reply from the second server
}

func TestDoRetryReturnsPermanentErrorsAtOnce(t *testing.T) {
	addr, accepted := fakeServer(t, func(conn net.Conn) {
		_, _ = conn.Write(protocol.AppendError(nil, protocol.CodeNotAuthorized, "not authorized for lock"))
	})
	err := New(Config{Address: addr}).DoRetry(testContext(t), "x", time.Second, func(context.Context, uint64) error {
		t.Error("fn called")
		return nil
	})
	if !errors.Is(err, protocol.ErrNotAuthorized) {
		t.Fatalf("DoRetry = %v, want not authorized", err)
	}
	if n := accepted.Load(); n != 1 {
		t.Fatalf("%d connections for a permanent error, want 1", n)
	}
}

func TestDoRetryStopsWhenContextEnds(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there now
	d := &countingDialer{}
	ctx, cancel := context.WithTimeout(testContext(t), 500*time.Millisecond)
	defer cancel()
	err = New(Config{Address: addr, Dialer: d}).DoRetry(ctx, "x", time.Second, func(context.Context, uint64) error {
		t.Error("fn called")
		return nil
	})
	var de *dialError
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &de) {
		t.Fatalf("DoRetry = %v, want the deadline and the last dial error", err)
	}
	if n := d.n.Load(); n < 2 {
		t.Fatalf("%d dials, want retries", n)
	}
}

// TestDoRetryNeverRerunsFn: a loss after fn started is returned, not retried.
func TestDoRetryNeverRerunsFn(t *testing.T) {
	srv := startServerAt(t, "127.0.0.1:0")
	var calls atomic.Int32
	err := New(Config{Address: srv.Addr().String()}).DoRetry(testContext(t), "once", 10*time.Second, func(ctx context.Context, _ uint64) error {
		calls.Add(1)
		go func() { _ = srv.Shutdown(context.Background()) }()
		<-ctx.Done()
		return nil
	})
	if !errors.Is(err, protocol.ErrShuttingDown) {
		t.Fatalf("DoRetry = %v, want server shutting down", err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("fn ran %d times, want once", n)
	}
}

// TestTLSAlertIsPermanent: a read that fails with the server's TLS alert is
// ErrTLSRefused, which DoRetry does not retry; other read failures are a
// lost connection, which it does.
func TestTLSAlertIsPermanent(t *testing.T) {
	alert := readError(&net.OpError{Op: "remote error", Err: tls.AlertError(42)})
	if !errors.Is(alert, ErrTLSRefused) || errors.Is(alert, ErrConnectionClosed) || transient(alert) {
		t.Errorf("a remote TLS alert = %v (transient %v); want ErrTLSRefused, not retried", alert, transient(alert))
	}
	// The same alert during the handshake (TLS 1.2) fails the dial.
	c := &Client{connectTimeout: time.Second, dialer: alertDialer{}}
	if _, err := c.dial(context.Background()); !errors.Is(err, ErrTLSRefused) || transient(err) {
		t.Errorf("a dial ended by a TLS alert = %v (transient %v); want ErrTLSRefused, not retried", err, transient(err))
	}
	reset := readError(&net.OpError{Op: "read", Err: syscall.ECONNRESET})
	if !errors.Is(reset, ErrConnectionClosed) || !transient(reset) {
		t.Errorf("a reset = %v (transient %v); want ErrConnectionClosed, retried", reset, transient(reset))
	}
}

// alertDialer fails every dial as crypto/tls does when the server sends an
// alert during the handshake.
type alertDialer struct{}

func (alertDialer) DialContext(context.Context, string, string) (net.Conn, error) {
	return nil, &net.OpError{Op: "remote error", Err: tls.AlertError(40)}
}
