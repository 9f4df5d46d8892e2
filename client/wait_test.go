package client

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/monolock/monolock/protocol"
)

// TestAcquireWithinBusy: queued behind a holder, the attempt is busy once
// its wait has passed (not the caller's context error), and leaves the
// queue: the holder's release grants the lock to a later attempt at once.
func TestAcquireWithinBusy(t *testing.T) {
	addr := startServer(t)
	ctx := testContext(t)
	c := New(Config{Address: addr})
	holder, err := c.Acquire(ctx, "within", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.AcquireWithin(ctx, "within", 10*time.Second, 200*ms)
	if !errors.Is(err, ErrBusy) || errors.Is(err, context.DeadlineExceeded) || transient(err) {
		t.Fatalf("AcquireWithin behind a holder = %v (transient %v), want ErrBusy, not retried", err, transient(err))
	}
	if err := holder.Close(); err != nil {
		t.Fatal(err)
	}
	next, err := c.TryAcquire(ctx, "within", 10*time.Second)
	if err != nil {
		t.Fatalf("TryAcquire after the release = %v: the busy attempt kept its place in the queue", err)
	}
	_ = next.Close()
}

// TestAcquireWithinUnanswered: a server that never answers the ACQUIRE
// within the wait is unavailable (retried), not busy, and the attempt's
// ACQUIRE is released with RELEASE.
func TestAcquireWithinUnanswered(t *testing.T) {
	after := make(chan byte, 1)
	addr, _ := fakeServer(t, func(conn net.Conn) {
		var b [1]byte
		if _, err := io.ReadFull(conn, b[:]); err == nil {
			after <- b[0]
		}
		if b[0] != byte(protocol.TypeRelease) {
			drain(conn)
		} // after RELEASE the server closes first

	})
	_, err := New(Config{Address: addr}).AcquireWithin(testContext(t), "silent", 10*time.Second, 200*ms)
	if !errors.Is(err, ErrHeartbeatTimeout) || errors.Is(err, ErrBusy) || !transient(err) {
		t.Fatalf("AcquireWithin unanswered = %v (transient %v), want ErrHeartbeatTimeout, retried", err, transient(err))
	}
	if b := await(t, after, "the frame after ACQUIRE"); b != byte(protocol.TypeRelease) {
		t.Fatalf("the client sent 0x%02x after ACQUIRE, want RELEASE", b)
	}
}
