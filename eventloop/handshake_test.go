package eventloop

import (
	"crypto/sha256"
	"errors"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/monolock/monolock/eventloop/tlsconn"
)

// feedUntilRefused feeds chunks, each read by the handshake as it comes,
// until in refuses one, and returns the bytes accepted.
func feedUntilRefused(t *testing.T, in *handshakeInput, chunk []byte) int {
	t.Helper()
	fed := 0
	for in.feed(chunk) {
		fed += len(chunk)
		buf := make([]byte, len(chunk))
		if n, err := in.Read(buf); n != len(chunk) || err != nil { // consumed as it comes
			t.Fatalf("read %d, %v", n, err)
		}
	}
	return fed
}

// serverHello is a ServerHello record of the server's with random.
func serverHello(random []byte) []byte {
	body := append([]byte{3, 3}, random...)
	msg := append([]byte{2, 0, byte(len(body) >> 8), byte(len(body))}, body...)
	return append([]byte{22, 3, 3, byte(len(msg) >> 8), byte(len(msg))}, msg...)
}

// helloRetryRandom is SHA-256("HelloRetryRequest"), the random that makes a
// ServerHello a HelloRetryRequest.
var helloRetryRandom = sha256.Sum256([]byte("HelloRetryRequest"))

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
	t.Run("hello", func(t *testing.T) {
		in := newHandshakeInput(newHandshakeSlots(1), nil)
		within(t, feedUntilRefused(t, in, make([]byte, chunk)), tlsconn.MaxHelloBuffered)
		in.finish("", nil)
		if len(in.slots.slots) != 0 {
			t.Fatal("a finished handshake still holds a compute slot")
		}
	})
	t.Run("last flight", func(t *testing.T) {
		in := newHandshakeInput(newHandshakeSlots(1), nil)
		in.feed(make([]byte, 500)) // the ClientHello
		in.serverWrote(serverHello(make([]byte, 32)))
		within(t, feedUntilRefused(t, in, make([]byte, chunk)), tlsconn.MaxClientFlight)
	})
	t.Run("hello retry request", func(t *testing.T) {
		in := newHandshakeInput(newHandshakeSlots(1), nil)
		in.feed(make([]byte, 20000)) // a first ClientHello
		in.serverWrote(serverHello(helloRetryRandom[:]))
		in.serverWrote([]byte{20, 3, 3, 0, 1, 1}) // its change_cipher_spec, a write of its own
		// The second ClientHello has the first one's bound, afresh.
		within(t, feedUntilRefused(t, in, make([]byte, chunk)), tlsconn.MaxHelloBuffered)

		in = newHandshakeInput(newHandshakeSlots(1), nil)
		in.feed(make([]byte, 500))
		in.serverWrote(serverHello(helloRetryRandom[:]))
		in.serverWrote([]byte{20, 3, 3, 0, 1, 1})
		in.feed(make([]byte, 500)) // the second ClientHello
		in.serverWrote(serverHello(make([]byte, 32)))
		within(t, feedUntilRefused(t, in, make([]byte, chunk)), tlsconn.MaxClientFlight)
	})
}

// A handshake waiting for input holds no compute slot; a closed one's read
// fails at once.
func TestHandshakeInputSlots(t *testing.T) {
	slots := newHandshakeSlots(1)
	a, b := newHandshakeInput(slots, nil), newHandshakeInput(slots, nil)
	a.feed([]byte{1})
	if _, err := a.Read(make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	// a holds the slot now; a read with nothing to read gives it back.
	got := make(chan error, 1)
	go func() {
		_, err := a.Read(make([]byte, 8))
		got <- err
	}()
	b.feed([]byte{2})
	if _, err := b.Read(make([]byte, 8)); err != nil { // takes the slot a gave back
		t.Fatal(err)
	}
	a.close()
	if err := <-got; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read of a closed handshake: %v", err)
	}
	b.finish("", nil)
	if len(slots.slots) != 0 {
		t.Fatalf("%d slots held after both ended", len(slots.slots))
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
	tr := &tlsTransport{gc: gc, hs: newHandshakeInput(newHandshakeSlots(1), nil)}
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
	tr = &tlsTransport{gc: gc, hs: newHandshakeInput(newHandshakeSlots(1), nil)}
	gc.wakes = 0
	_, _ = tr.Write([]byte("server hello ..."))
	gc.runQueue()
	if gc.wakes != 0 {
		t.Fatalf("%d wake-ups before the handshake is done, want 0", gc.wakes)
	}
}

// The handshake's turns: from the ClientHello the next step is the
// server's; waiting for more input is the client's; input arriving makes
// it the server's again; the result ends it. Only the server's turns are
// summed, for io-timeout to leave out.
func TestHandshakeTurns(t *testing.T) {
	in := newHandshakeInput(newHandshakeSlots(1), nil)
	if _, server := in.excused(); server {
		t.Fatal("before the goroutine starts: want no server's turn")
	}
	in.serverTurn() // the goroutine starts with the hello
	if ended, server := in.excused(); ended != 0 || !server {
		t.Fatalf("after the hello: %v ended, server's turn %v; want 0 and true", ended, server)
	}
	in.feed([]byte{1})
	p := make([]byte, 8)
	if n, err := in.Read(p); n != 1 || err != nil {
		t.Fatalf("Read: %d, %v", n, err)
	}
	done := make(chan struct{})
	go func() { // the goroutine waits for the client
		defer close(done)
		_, _ = in.Read(p)
	}()
	for _, server := in.excused(); server; _, server = in.excused() {
		runtime.Gosched() // until the reader has found nothing and waits
	}
	first, _ := in.excused()
	if first <= 0 {
		t.Fatalf("the server's first turn summed to %v", first)
	}
	in.feed([]byte{2})
	<-done
	if _, server := in.excused(); !server {
		t.Fatal("input read: want the server's turn")
	}
	in.finish("", nil)
	ended, server := in.excused()
	if server || ended <= first {
		t.Fatalf("after the result: %v ended (first turn %v), server's turn %v", ended, first, server)
	}
}

// A session whose handshake is the server's turn is not closed by
// io-timeout, however long the turn; what was the server's is left out of
// the ACQUIRE's io-timeout, up to maxExcused io-timeouts.
func TestRuleServerTurnsAreExcused(t *testing.T) {
	r := newRig(t, Config{IOTimeout: time.Second})
	o := r.o
	hs := newHandshakeInput(newHandshakeSlots(1), nil)
	hs.serverTurn()
	s := &session{conn: &tlsConn{phase: phaseHandshake, tr: tlsTransport{hs: hs}}}
	if excused, server := o.serverTurns(s); excused != 0 || !server {
		t.Fatalf("server's turn: excused %v, %v", excused, server)
	}
	hs.mu.Lock()
	hs.serverSince, hs.serverTime = time.Time{}, 3*time.Second
	hs.mu.Unlock()
	if excused, server := o.serverTurns(s); excused != 3*time.Second || server {
		t.Fatalf("client's turn after 3 s of the server's: excused %v, server's turn %v", excused, server)
	}
	hs.mu.Lock()
	hs.serverTime = time.Hour
	hs.mu.Unlock()
	if excused, _ := o.serverTurns(s); excused != maxExcused*time.Second {
		t.Fatalf("an hour of the server's turns: excused %v, want the cap %v", excused, maxExcused*time.Second)
	}
	hs.mu.Lock()
	hs.serverSince = time.Now()
	hs.mu.Unlock()
	if _, server := o.serverTurns(s); server {
		t.Fatal("past the cap, a server's turn must no longer hold the timer off")
	}
	plain := &session{conn: r.peer().fakeConn}
	if excused, server := o.serverTurns(plain); excused != 0 || server {
		t.Fatalf("a plain session: excused %v, %v", excused, server)
	}
}
