package eventloop_test

import (
	"context"
	"fmt"
	"net"
	"testing"

	"github.com/monolock/monolock/internal/testsupport/wire"
	"github.com/monolock/monolock/protocol"
	"github.com/monolock/monolock/protocol/admin"
)

// Shutdown sends ERROR 0x01 to every session and closes it, and promotes
// nobody meanwhile: holders see ERROR 0x01, waiters see their WAITING and then
// ERROR 0x01, never an ACQUIRED. Shutdown and Serve both return nil.
func TestShutdown(t *testing.T) {
	ts := startServer(t, 0)
	const locks, waitersPerLock = 6, 4
	var holders, waiters []*wire.Conn
	open := 0
	for i := range locks {
		name := fmt.Sprintf("shutdown-%d", i)
		// Shutdown walks the sessions in some order. For half of the locks the
		// holder's connection is the oldest, for the other half the newest, so
		// whatever the order, some holder is closed before its waiters, and a
		// server that promoted during shutdown would send one an ACQUIRED.
		holderFirst := i%2 == 0
		var h *wire.Conn
		if holderFirst {
			h, _ = holder(t, ts, name, longLease)
			open++
		}
		ws := make([]*wire.Conn, waitersPerLock)
		for j := range ws {
			ws[j] = dial(t, ts, fmt.Sprintf("waiter %d of %s", j, name))
			open++
			ts.waitStatsFunc(t, fmt.Sprintf("%d sessions", open), func(st admin.Stats) bool { return st.Sessions == open })
		}
		if !holderFirst {
			h, _ = holder(t, ts, name, longLease)
			open++
		}
		holders = append(holders, h)
		for _, w := range ws {
			w.SendAcquire(name, longLease)
			w.ExpectWaiting()
		}
		waiters = append(waiters, ws...)
	}
	waiters[0].SendHeartbeat()
	waiters[0].ExpectWaiting()
	// Sessions that have not completed an ACQUIRE are sessions too.
	silent := dial(t, ts, "silent")
	partial := dial(t, ts, "partial")
	partial.Send(wire.Acquire("shutdown-partial", longLease)[:4])
	sessions := len(holders) + len(waiters) + 2
	ts.waitStats(t, admin.Stats{Sessions: sessions, Locks: len(holders), Waiters: len(waiters), Timers: sessions})

	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	ts.shutdown(t, ctx)

	// Every session's next frame is ERROR 0x01 (so no ACQUIRED came first),
	// and then the connection is closed.
	all := append(append(append([]*wire.Conn{}, holders...), waiters...), silent, partial)
	for _, c := range all {
		f := c.ReadFrame()
		if f.Type != protocol.TypeError || f.Code != protocol.CodeShuttingDown {
			t.Errorf("%s: got %v after Shutdown, want ERROR 0x01", c.Label, f)
			continue
		}
		if err := wire.CheckReason(f); err != nil {
			t.Errorf("%s: %v", c.Label, err)
		}
		if err := c.EOFErr(); err != nil {
			t.Errorf("%s: after ERROR 0x01: %v", c.Label, err)
		}
	}

	// The listener is closed, and a second Shutdown is harmless.
	if nc, err := net.DialTimeout("tcp", ts.Addr().String(), safety); err == nil {
		_ = nc.Close()
		t.Errorf("dial after Shutdown succeeded")
	}
	if err := ts.Shutdown(ctx); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
}

// Shutdown of an idle server returns nil, and so does Serve.
func TestShutdownIdle(t *testing.T) {
	ts := startServer(t, 0)
	c, _ := holder(t, ts, "idle", longLease) // Serve is surely running
	c.Close()
	ts.waitStats(t, admin.Stats{})
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	ts.shutdown(t, ctx)
}
