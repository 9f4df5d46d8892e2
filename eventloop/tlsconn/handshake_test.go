package tlsconn

import (
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// testHandshake is a handshake's state with no goroutine of crypto/tls's:
// the test plays the goroutine. wakes counts the loop's turns it asked for.
func testHandshake(slots cpuSlots) (*handshake, *atomic.Int32) {
	wakes := new(atomic.Int32)
	return newHandshake(slots, nil, func() { wakes.Add(1) }), wakes
}

// feedUntilRefused passes chunks as the loop does (the budget first), each
// read by the handshake as it comes, until the budget refuses one, and
// returns the bytes accepted.
func feedUntilRefused(t *testing.T, hs *handshake, chunk []byte) int {
	t.Helper()
	fed := 0
	for hs.budget.spend(len(chunk)) {
		hs.input.feed(chunk)
		fed += len(chunk)
		buf := make([]byte, len(chunk))
		if n, err := hs.Read(buf); n != len(chunk) || err != nil { // consumed as it comes
			t.Fatalf("read %d, %v", n, err)
		}
	}
	return fed
}

// The handshake's input is bounded however the client spreads it: a
// ClientHello's worth while the server waits for one, and the last flight's
// once the server has answered it.
func TestHandshakeInputBound(t *testing.T) {
	const chunk = 1000
	within := func(t *testing.T, fed, bound int) {
		t.Helper()
		if fed > bound || fed+chunk <= bound {
			t.Fatalf("fed %d bytes before the bound of %d", fed, bound)
		}
	}
	hello := serverRecord(typeServerHello, make([]byte, 32))
	hrr := serverRecord(typeServerHello, helloRetryRandom[:])
	t.Run("hello", func(t *testing.T) {
		slots := make(cpuSlots, 1)
		hs, _ := testHandshake(slots)
		within(t, feedUntilRefused(t, hs, make([]byte, chunk)), MaxHelloBuffered)
		hs.finish("", nil)
		if len(slots) != 0 {
			t.Fatal("a finished handshake still holds a compute slot")
		}
	})
	t.Run("last flight", func(t *testing.T) {
		hs, _ := testHandshake(make(cpuSlots, 1))
		hs.budget.spend(500) // the ClientHello
		hs.budget.serverSent(hello)
		within(t, feedUntilRefused(t, hs, make([]byte, chunk)), MaxClientFlight)
	})
	t.Run("hello retry request", func(t *testing.T) {
		hs, _ := testHandshake(make(cpuSlots, 1))
		hs.budget.spend(20000) // a first ClientHello
		hs.budget.serverSent(hrr)
		hs.budget.serverSent(changeCipherSpec) // a write of its own
		// The second ClientHello has the first one's bound, afresh.
		within(t, feedUntilRefused(t, hs, make([]byte, chunk)), MaxHelloBuffered)

		hs, _ = testHandshake(make(cpuSlots, 1))
		hs.budget.spend(500)
		hs.budget.serverSent(hrr)
		hs.budget.serverSent(changeCipherSpec)
		hs.budget.spend(500) // the second ClientHello
		hs.budget.serverSent(hello)
		within(t, feedUntilRefused(t, hs, make([]byte, chunk)), MaxClientFlight)
	})
	t.Run("hello retry request in pieces", func(t *testing.T) {
		// However crypto/tls cuts its writes, the HelloRetryRequest is
		// read from its record: the second ClientHello keeps the hello's
		// bound, not the last flight's.
		hs, _ := testHandshake(make(cpuSlots, 1))
		hs.budget.spend(500)
		flight := append(append([]byte(nil), hrr...), changeCipherSpec...)
		for _, cut := range [][]byte{flight[:10], flight[10:11], flight[11:]} {
			hs.budget.serverSent(cut)
		}
		within(t, feedUntilRefused(t, hs, make([]byte, chunk)), MaxHelloBuffered)
	})
}

// A handshake waiting for input holds no compute slot, and asks the loop
// for a turn when it starts to wait; a closed one's read fails at once.
func TestHandshakeInputSlots(t *testing.T) {
	slots := make(cpuSlots, 1)
	a, aWakes := testHandshake(slots)
	b, _ := testHandshake(slots)
	a.input.feed([]byte{1})
	if _, err := a.Read(make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	// a holds the slot now; a read with nothing to read gives it back.
	got := make(chan error, 1)
	go func() {
		_, err := a.Read(make([]byte, 8))
		got <- err
	}()
	b.input.feed([]byte{2})
	if _, err := b.Read(make([]byte, 8)); err != nil { // takes the slot a gave back
		t.Fatal(err)
	}
	a.input.close()
	if err := <-got; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read of a closed handshake: %v", err)
	}
	if n := aWakes.Load(); n != 1 {
		t.Fatalf("a waited for the client once and asked the loop for %d turns; want 1", n)
	}
	b.finish("", nil)
	if len(slots) != 0 {
		t.Fatalf("%d slots held after both ended", len(slots))
	}
}

// The loop sees when the handshake waits for the client: the reader has
// taken everything and found nothing more (idle), and has asked for a turn
// in which the loop marks the client's turn with its time.
func TestHandshakeReaderIdle(t *testing.T) {
	wakes := make(chan struct{}, 4)
	hs := newHandshake(make(cpuSlots, 1), nil, func() { wakes <- struct{}{} })
	if hs.input.idle() {
		t.Fatal("idle before the reader has read")
	}
	hs.input.feed([]byte{1})
	p := make([]byte, 8)
	if n, err := hs.Read(p); n != 1 || err != nil {
		t.Fatalf("Read: %d, %v", n, err)
	}
	if hs.input.idle() {
		t.Fatal("idle while the server works on its input")
	}
	done := make(chan struct{})
	go func() { // the goroutine waits for the client
		defer close(done)
		_, _ = hs.Read(p)
	}()
	<-wakes
	if !hs.input.idle() {
		t.Fatal("the reader asked for a turn but is not idle")
	}
	hs.input.feed([]byte{2})
	if hs.input.idle() {
		t.Fatal("idle with input waiting")
	}
	<-done
	hs.finish("", nil)
	if !hs.finished() || hs.got.err != nil {
		t.Fatalf("the result: finished %v, %+v", hs.finished(), hs.got)
	}
}

// The server's turns are summed with the loop's times, and only they:
// from the ClientHello to the reader's wait, and again from the client's
// next flight.
func TestTurnClock(t *testing.T) {
	var c turnClock
	c.serverTurn(10 * time.Second) // the ClientHello
	c.serverTurn(11 * time.Second) // more input during the server's turn changes nothing
	if c.ended != 0 || !c.server {
		t.Fatalf("in the server's first turn: %v ended, server's turn %v", c.ended, c.server)
	}
	c.clientTurn(13 * time.Second)
	c.clientTurn(20 * time.Second) // still the client's
	if c.ended != 3*time.Second || c.server {
		t.Fatalf("after the first turn: %v ended, server's turn %v; want 3s, false", c.ended, c.server)
	}
	c.serverTurn(30 * time.Second)
	c.clientTurn(31 * time.Second)
	if c.ended != 4*time.Second || c.server {
		t.Fatalf("after the second turn: %v ended, server's turn %v; want 4s, false", c.ended, c.server)
	}
}

// queuedConn is a gnet.Conn whose AsyncWrite queues the write, as gnet does
// until its next pass, and whose Wake is counted.
type queuedConn struct {
	gnet.Conn
	queued []gnet.AsyncCallback
	wakes  int
}

func (c *queuedConn) AsyncWrite(_ []byte, cb gnet.AsyncCallback) error {
	c.queued = append(c.queued, cb)
	return nil
}

func (c *queuedConn) Wake(gnet.AsyncCallback) error { c.wakes++; return nil }

// runQueue writes what was queued, in order, as gnet's pass does.
func (c *queuedConn) runQueue() {
	for _, cb := range c.queued {
		_ = cb(c, nil)
	}
	c.queued = nil
}

// The handshake's last flight (the session ticket, with mutual TLS) is
// counted until gnet has written it, so the loop writes nothing of the
// session's before it; once the last of it is out and the handshake is done,
// the loop is woken to read what the client sent meanwhile.
func TestHandshakeWritesAreCountedUntilWritten(t *testing.T) {
	gc := &queuedConn{}
	hs, _ := testHandshake(make(cpuSlots, 1))
	tr := &transport{gc: gc, hs: hs}
	for _, flight := range []string{"server hello ...", "session ticket"} {
		if n, err := tr.Write([]byte(flight)); err != nil || n != len(flight) {
			t.Fatalf("Write: %d, %v", n, err)
		}
	}
	if got := tr.asyncWrites.Load(); got != 2 {
		t.Fatalf("%d writes counted while queued, want 2", got)
	}
	tr.hs.finish("", nil)
	gc.runQueue()
	if got := tr.asyncWrites.Load(); got != 0 || gc.wakes != 1 {
		t.Fatalf("after the queue ran: %d writes counted, %d wake-ups; want 0 and 1", got, gc.wakes)
	}

	// While the handshake goes on, a written flight wakes nobody.
	hs, _ = testHandshake(make(cpuSlots, 1))
	tr = &transport{gc: gc, hs: hs}
	gc.wakes = 0
	_, _ = tr.Write([]byte("server hello ..."))
	gc.runQueue()
	if gc.wakes != 0 {
		t.Fatalf("%d wake-ups before the handshake is done, want 0", gc.wakes)
	}
}
