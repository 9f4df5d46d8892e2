package eventloop_test

import (
	"testing"

	"github.com/monolock/monolock/internal/tcpstate"
	"github.com/monolock/monolock/internal/testsupport/wire"
	"github.com/monolock/monolock/protocol"
	"github.com/monolock/monolock/protocol/admin"
)

// timeWaitAfterClose closes c and returns how many TIME_WAIT entries its
// connection leaves on the client's side once it has finished closing.
func timeWaitAfterClose(t *testing.T, c *wire.Conn) int {
	t.Helper()
	_ = c.NC.Close()
	n, err := tcpstate.ConnTimeWait(c.NC, safety)
	if err != nil {
		t.Fatalf("%s: %v", c.Label, err)
	}
	return n
}

// RELEASE over real sockets: the server answers nothing, closes first and
// promotes the next waiter; the client, closing second, keeps no TIME_WAIT
// entry for its port. A client that closes first instead (the FIN-first
// release) keeps one: the check sees what it looks for.
func TestReleaseServerClosesFirst(t *testing.T) {
	ts := startServer(t, 0)
	const lock = "release-wire"
	h, tok := holder(t, ts, lock, longLease)
	w := waiter(t, ts, "waiter", lock, longLease)

	h.SendHeartbeat()
	h.SendRelease()
	h.ExpectToken(tok) // frames before RELEASE are answered
	h.ExpectEOF()      // then nothing: the server has closed
	next := w.ExpectAcquired()
	if next <= tok {
		t.Fatalf("promoted waiter got token %d after %d", next, tok)
	}
	if n := timeWaitAfterClose(t, h); n != 0 {
		t.Errorf("after RELEASE: %d TIME_WAIT entries on the client's port, want 0", n)
	}

	// The waiter, now the holder, releases by closing first: its port keeps
	// the TIME_WAIT entry RELEASE avoids.
	if n := timeWaitAfterClose(t, w); n == 0 {
		t.Error("a client that closed first left no TIME_WAIT entry: the check cannot see one")
	}
	ts.waitStats(t, admin.Stats{})
}

// A waiter's RELEASE takes it out of the queue; the server closes first.
func TestReleaseWhileWaiting(t *testing.T) {
	ts := startServer(t, 0)
	const lock = "release-waiting"
	h, _ := holder(t, ts, lock, longLease)
	w1 := waiter(t, ts, "waiter 1", lock, longLease)
	w2 := waiter(t, ts, "waiter 2", lock, longLease)
	w1.SendRelease()
	w1.ExpectEOF()
	if n := timeWaitAfterClose(t, w1); n != 0 {
		t.Errorf("after a waiter's RELEASE: %d TIME_WAIT entries on the client's port, want 0", n)
	}
	h.SendRelease()
	h.ExpectEOF()
	w2.ExpectAcquired() // w1 left the queue: w2 is next
	w2.SendRelease()
	w2.ExpectEOF()
	ts.waitStats(t, admin.Stats{})
}

// Before ACQUIRE, RELEASE is ERROR 0x11 as HEARTBEAT is.
func TestReleaseBeforeAcquire(t *testing.T) {
	ts := startServer(t, 0)
	c := dial(t, ts, "release first")
	c.SendRelease()
	c.ExpectErrorThenEOF(protocol.CodeFirstMessageNotAcquire)
}

// Over TLS the RELEASE travels inside the records, and the server's
// close_notify and FIN go first.
func TestReleaseOverTLS(t *testing.T) {
	ts, pki := startTLSServer(t, 0, 0)
	c := dialTLS(t, ts, pki)
	c.SendAcquire("release-tls", longLease)
	c.ExpectAcquired()
	c.SendRelease()
	c.ExpectEOF()
	if n := timeWaitAfterClose(t, c); n != 0 {
		t.Errorf("after RELEASE over TLS: %d TIME_WAIT entries on the client's port, want 0", n)
	}
	ts.waitStats(t, admin.Stats{})
}
