package eventloop_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/monolock/monolock/eventloop"
	"github.com/monolock/monolock/internal/testsupport/inproc"
	"github.com/monolock/monolock/internal/testsupport/wire"
	"github.com/monolock/monolock/protocol/admin"
)

// safety bounds every blocking wait of these tests. It is a net against a hung
// test, never a timing assertion: the awaited event normally comes in
// microseconds.
const safety = 5 * time.Second

// longLease is a lease no test outlives, for sessions that never heartbeat.
const longLease = 120_000

// testServer is a server running in-process on a loopback port.
type testServer struct {
	*inproc.Server
}

// startServer starts a server on 127.0.0.1 with the given io-timeout (0: the
// default) and shuts it down when the test ends.
func startServer(t testing.TB, ioTimeout time.Duration) *testServer {
	t.Helper()
	return startServerConfig(t, eventloop.Config{
		ListenAddress: "127.0.0.1:0",
		IOTimeout:     ioTimeout,
		Logger:        zerolog.Nop(),
	})
}

// startServerConfig starts a server with cfg and shuts it down when the test
// ends.
func startServerConfig(t testing.TB, cfg eventloop.Config) *testServer {
	t.Helper()
	return &testServer{inproc.Start(t, cfg)}
}

// shutdown shuts ts down from the test itself, within ctx: Shutdown and then
// Serve must return nil.
func (ts *testServer) shutdown(t testing.TB, ctx context.Context) {
	t.Helper()
	if err := ts.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := ts.Stop(); err != nil {
		t.Fatal(err)
	}
}

// stats reads the server's counters.
func (ts *testServer) stats(t testing.TB) admin.Stats {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	st, err := ts.Stats(ctx)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	return st
}

// waitStats polls Stats until its gauges (sessions, locks, waiters,
// timers) equal want's; the server reaches the state asynchronously (a
// client's close is an event the server handles later). The counts since
// start (grants, expiries, the newest token) only grow and are not compared.
func (ts *testServer) waitStats(t testing.TB, want admin.Stats) {
	t.Helper()
	gauges := func(st admin.Stats) [4]int { return [4]int{st.Sessions, st.Locks, st.Waiters, st.Timers} }
	what := fmt.Sprintf("sessions %d, locks %d, waiters %d, timers %d", want.Sessions, want.Locks, want.Waiters, want.Timers)
	ts.waitStatsFunc(t, what, func(st admin.Stats) bool { return gauges(st) == gauges(want) })
}

// waitStatsFunc polls Stats until ok accepts it.
func (ts *testServer) waitStatsFunc(t testing.TB, what string, ok func(admin.Stats) bool) {
	t.Helper()
	deadline := time.Now().Add(safety)
	for {
		st := ts.stats(t)
		if ok(st) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Stats = %+v, still not %s after %v", st, what, safety)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// dial opens a raw protocol connection to ts, bound to t, and closes it
// when the test ends.
func dial(t testing.TB, ts *testServer, label string) *wire.Conn {
	t.Helper()
	return wire.MustDial(t, ts.Addr().String(), wire.Options{Label: label, Safety: safety})
}

// dialErr opens a connection without a test to report to (for goroutines);
// the caller closes it.
func dialErr(ts *testServer, label string) (*wire.Conn, error) {
	return wire.Dial(ts.Addr().String(), wire.Options{Label: label, Safety: safety})
}

// holder dials and takes a free lock, returning the connection and its token.
func holder(t testing.TB, ts *testServer, name string, leaseMS uint32) (*wire.Conn, uint64) {
	t.Helper()
	return wire.Holder(t, ts.Addr().String(), wire.Options{Label: "holder of " + name, Safety: safety}, name, leaseMS)
}

// waiter dials and queues on a held lock.
func waiter(t testing.TB, ts *testServer, label, name string, leaseMS uint32) *wire.Conn {
	t.Helper()
	return wire.Waiter(t, ts.Addr().String(), wire.Options{Label: label, Safety: safety}, name, leaseMS)
}

// queueWaiters dials n waiters on a held lock. Each reads its WAITING before
// the next connects, so the index is the arrival order.
func queueWaiters(t testing.TB, ts *testServer, name string, n int) []*wire.Conn {
	t.Helper()
	ws := make([]*wire.Conn, n)
	for i := range ws {
		ws[i] = waiter(t, ts, fmt.Sprintf("waiter %d", i), name, longLease)
	}
	return ws
}

// promoteInOrder closes the holder h, whose token is tok, then each new holder
// in turn, and checks that the waiters of ws that have not left are promoted
// in queue order, each with a larger token. It closes the last holder too.
func promoteInOrder(t testing.TB, h *wire.Conn, tok uint64, ws []*wire.Conn, left func(i int) bool) {
	t.Helper()
	cur := h
	for i, w := range ws {
		if left(i) {
			continue
		}
		cur.Close()
		// Were anyone but w promoted, w would see nothing and the read would
		// time out.
		next := w.ExpectAcquired()
		if next <= tok {
			t.Fatalf("waiter %d: token %d after %d", i, next, tok)
		}
		tok, cur = next, w
	}
	cur.Close()
}

// fdBudget returns how many client connections a test may open: each costs a
// descriptor on both ends, and the process keeps a margin for everything else.
func fdBudget(t testing.TB, want int) int {
	t.Helper()
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatalf("getrlimit: %v", err)
	}
	room := (int(rl.Cur) - 256) / 2
	if room < want {
		t.Logf("RLIMIT_NOFILE is %d: using %d connections instead of %d", rl.Cur, max(room, 0), want)
		return max(room, 0)
	}
	return want
}
