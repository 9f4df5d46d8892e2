package eventloop_test

import (
	"bytes"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/monolock/monolock/internal/testsupport/wire"
	"github.com/monolock/monolock/protocol"
	"github.com/monolock/monolock/protocol/admin"
)

// ioTimeout is short so that these tests wait little; every assertion on it
// is a correctness bound (never before io-timeout), not a speed requirement.
const ioTimeout = 300 * time.Millisecond

// checkNotBefore fails if the server closed a connection before io-timeout
// had passed since start (a time taken before the client's last action), and
// logs how late it was. How late is no assertion: on a busy machine it may
// be anything; the rule scripts pin it to the wheel's tick.
func checkNotBefore(t *testing.T, what string, start time.Time) {
	t.Helper()
	d := time.Since(start)
	t.Logf("%s: closed %v after the client's last action (io-timeout %v)", what, d, ioTimeout)
	if d < ioTimeout {
		t.Fatalf("%s: closed after %v, before io-timeout %v", what, d, ioTimeout)
	}
}

// A connection that never sends is closed after io-timeout, without a frame.
func TestIOTimeoutSilentConnection(t *testing.T) {
	ts := startServer(t, ioTimeout)
	start := time.Now() // before dialling: the server accepts after this
	c := dial(t, ts, "silent")
	c.ExpectEOF()
	checkNotBefore(t, "silent connection", start)
	ts.waitStats(t, admin.Stats{})
}

// A connection that starts an ACQUIRE and stops is closed after io-timeout.
func TestIOTimeoutPartialAcquire(t *testing.T) {
	ts := startServer(t, ioTimeout)
	start := time.Now()
	c := dial(t, ts, "partial")
	c.Send(wire.Acquire("partial", longLease)[:5])
	c.ExpectEOF()
	checkNotBefore(t, "partial ACQUIRE", start)
	ts.waitStats(t, admin.Stats{})
}

// A holder that leaves a frame half-sent is closed after io-timeout, although
// its lease is long, and its lock passes on.
func TestIOTimeoutPartialFrameAfterAcquire(t *testing.T) {
	ts := startServer(t, ioTimeout)
	h, t1 := holder(t, ts, "half-sent", longLease)
	w := waiter(t, ts, "waiter", "half-sent", longLease)
	start := time.Now()
	h.Send(wire.Acquire("half-sent", longLease)[:5]) // the start of a (duplicate) ACQUIRE
	h.ExpectEOF()
	checkNotBefore(t, "half-sent frame", start)
	if t2 := w.ExpectAcquired(); t2 <= t1 {
		t.Fatalf("token %d after %d", t2, t1)
	}
}

// io-timeout bounds the wait for an ACQUIRE, not the life of a session: a
// silent holder with a long lease outlives io-timeout. The event that shows
// io-timeout has passed is a later silent connection being closed.
func TestIOTimeoutDoesNotEndRegisteredSessions(t *testing.T) {
	ts := startServer(t, ioTimeout)
	h, tok := holder(t, ts, "idle holder", longLease)
	w := waiter(t, ts, "idle waiter", "idle holder", longLease)
	start := time.Now()
	probe := dial(t, ts, "probe")
	probe.ExpectEOF()
	checkNotBefore(t, "probe", start)
	h.SendHeartbeat()
	h.ExpectToken(tok)
	w.SendHeartbeat()
	w.ExpectWaiting()
}

// A client that drips its ACQUIRE one byte every 100 ms is served as long as
// the whole frame arrives within io-timeout. A nine-byte ACQUIRE takes 800 ms
// that way, so this server's io-timeout is 2 s rather than ioTimeout.
func TestIOTimeoutSlowDripWithinTimeout(t *testing.T) {
	ts := startServer(t, 2*time.Second)
	c := dial(t, ts, "drip")
	frame := wire.Acquire("d", longLease)
	if len(frame) != 9 {
		t.Fatalf("frame is %d bytes", len(frame))
	}
	start := time.Now()
	c.SendBytewise(frame, 100*time.Millisecond)
	tok := c.ExpectAcquired()
	t.Logf("ACQUIRE dripped over %v", time.Since(start))
	c.SendHeartbeat()
	c.ExpectToken(tok)
}

// A client that floods heartbeats and never reads its replies is closed; the
// server's memory for it stays bounded, and a well-behaved client on the same
// server keeps getting answers meanwhile and afterwards.
func TestIOTimeoutFloodWithoutReading(t *testing.T) {
	ts := startServer(t, ioTimeout)
	good, goodTok := holder(t, ts, "good", longLease)
	flooder, _ := holder(t, ts, "flood", longLease)

	const (
		chunk = 64 << 10
		limit = 64 << 20 // far beyond what the kernel and the server may buffer
	)
	type result struct {
		written int
		err     error
	}
	started := make(chan struct{})
	done := make(chan result, 1)
	go func() {
		hb := bytes.Repeat(wire.Heartbeat, chunk)
		written, signal := 0, started
		for written < limit {
			if err := flooder.NC.SetWriteDeadline(time.Now().Add(safety)); err != nil {
				done <- result{written, err}
				return
			}
			n, err := flooder.NC.Write(hb)
			written += n
			if written > 0 && signal != nil {
				close(signal)
				signal = nil
			}
			// A slow server (go test -race on a loaded machine) may take
			// longer than the deadline to take a chunk; that is fine as long
			// as it makes progress. A write that moved nothing for the whole
			// deadline means the server stopped reading without closing.
			if err != nil && (n == 0 || !errors.Is(err, os.ErrDeadlineExceeded)) {
				done <- result{written, err}
				return
			}
		}
		done <- result{written, nil}
	}()

	select {
	case <-started:
	case r := <-done:
		t.Fatalf("flood ended before it began: %d bytes, %v", r.written, r.err)
	}
	during := 0
	var slowest time.Duration
	ping := func() {
		start := time.Now()
		good.SendHeartbeat()
		good.ExpectToken(goodTok)
		slowest = max(slowest, time.Since(start))
	}
	var r result
	for waiting := true; waiting; {
		select {
		case r = <-done:
			waiting = false
		default:
			ping()
			during++
		}
	}
	for range 3 {
		ping()
	}
	t.Logf("flooder closed after %d MiB written; the good client had %d heartbeats answered meanwhile, the slowest in %v", r.written>>20, during, slowest)
	switch {
	case r.err == nil:
		t.Fatalf("%d MiB of heartbeats written without reading a reply, and the server did not close the connection", r.written>>20)
	case errors.Is(r.err, os.ErrDeadlineExceeded):
		t.Fatalf("a write moved nothing for %v: the server stopped reading the flooder but did not close it", safety)
	}
	var ne net.Error
	if errors.As(r.err, &ne) && ne.Timeout() {
		t.Fatalf("flood write: %v", r.err)
	}
	t.Logf("flood write error: %v", r.err)
	if during < 1 {
		t.Logf("the flood ended before the good client got a heartbeat in (the 3 after it were answered)")
	}
	ts.waitStats(t, admin.Stats{Sessions: 1, Locks: 1, Waiters: 0, Timers: 1})
	good.Close()
	ts.waitStats(t, admin.Stats{})
}

// A client that pipelines heartbeats must not starve the others: while one
// floods, a holder with a 2 s lease that heartbeats every 20 ms keeps its
// lock. (How long its answers take is a figure, logged, not a verdict: the
// verdict is the lock it keeps.)
func TestFloodDoesNotStarveOtherSessions(t *testing.T) {
	ts := startServer(t, ioTimeout)
	const lease = 2 * time.Second
	good, tok := holder(t, ts, "good", uint32(lease/time.Millisecond))
	flooder, _ := holder(t, ts, "flood", longLease)
	stop := make(chan struct{})
	flooded := make(chan struct{})
	go func() {
		defer close(flooded)
		hb := bytes.Repeat(wire.Heartbeat, 64<<10)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := flooder.NC.SetWriteDeadline(time.Now().Add(safety)); err != nil {
				return
			}
			if _, err := flooder.NC.Write(hb); err != nil {
				return // closed by the server: the flood is over
			}
		}
	}()
	defer func() { close(stop); <-flooded }()
	var slowest time.Duration
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for range 100 {
		<-tick.C
		start := time.Now()
		if err := good.SendErr(wire.Heartbeat); err != nil {
			t.Fatalf("heartbeat: %v (slowest answer so far %v)", err, slowest)
		}
		f, err := good.ReadErr(safety)
		if err != nil || f.Type != protocol.TypeAcquired || f.Token != tok {
			t.Fatalf("heartbeat answered %v, %v after %v, want ACQUIRED(%d) (slowest answer before %v)", f, err, time.Since(start), tok, slowest)
		}
		slowest = max(slowest, time.Since(start))
	}
	t.Logf("slowest heartbeat answer during the flood: %v", slowest)
}
