package tlsconn

import (
	"bytes"
	"crypto/tls"
	"errors"
	"net"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

// A TLS connection is a session of the loop's from its accept: one
// io-timeout, counted from the accept, covers its handshake and its
// ACQUIRE. Its handshake goes through these phases.
//
//   - hello: the loop waits until the client's ClientHello has arrived whole.
//     Until then the connection costs what a silent plain one costs: a
//     descriptor, a session, a timer, and the bytes of a partial ClientHello
//     (at most MaxHelloBuffered). No goroutine, no slot.
//   - handshake: crypto/tls cannot suspend a handshake and resume it later,
//     so the rest runs on a goroutine of its own. The loop passes the
//     client's later flights to it (bounded by inputBudget) and gnet writes
//     what it sends. The goroutine holds a compute slot only while it has
//     input to work on: waiting for the client holds none, so stalled
//     clients never keep a well-behaved one waiting.
//   - open: the handshake is done; the session reads and writes records
//     through gnet's buffers (conn.go).
//
// A refused handshake (its alert sent) lingers a moment before it closes, so
// that the client reads the alert instead of a reset.
type phase uint8

const (
	phaseHello     phase = iota // waiting for the whole ClientHello, in the loop
	phaseHandshake              // a goroutine runs the handshake
	phaseRefused                // the handshake failed; the alert is out, input is dropped
	phaseOpen                   // established; records go through the loop
)

// EventKind is what a turn of a handshake tells the owner.
type EventKind uint8

const (
	// Pending: nothing for the owner; the handshake goes on, or a refused
	// one's input was dropped.
	Pending EventKind = iota
	// Opened: the handshake is done. Event.Identity is the client's;
	// records that came with its last flight may be waiting, which no
	// OnTraffic will announce, so the owner reads the session's plaintext
	// (Peek) in the same turn.
	Opened
	// Refused: crypto/tls refused the handshake and its alert is out;
	// Event.Err says why. The owner closes the session once Event.Linger
	// has passed, or at once when Linger is zero.
	Refused
	// Closed: the connection is to close now, for Event.Err.
	Closed
)

// Event is the outcome of a turn of a session whose handshake is not done.
type Event struct {
	Kind     EventKind
	Identity string        // Opened: from the client's certificate; "" without one
	Err      error         // Refused, Closed: why
	Linger   time.Duration // Refused: how long the client may take to read the alert
	// ServerTime is, for Opened, how much of the handshake was the server's
	// turn (turnClock), which the ACQUIRE's io-timeout may leave out.
	ServerTime time.Duration
}

var (
	// ErrFlightTooLarge is a client that sent more than its handshake
	// needs before the handshake was done.
	ErrFlightTooLarge = errors.New("the client sent more than its TLS handshake needs before the handshake was done")
	// ErrShuttingDown is a ClientHello that arrived while the server shuts
	// down: no handshake starts.
	ErrShuttingDown = errors.New("the server is shutting down: no TLS handshake starts")
	// ErrLingered is a refused client that kept sending past lingerBytes.
	ErrLingered = errors.New("a refused TLS client kept sending after the alert")
)

// A refused handshake ends with crypto/tls's alert ("certificate
// required", "bad certificate", …). The client's last flight, and maybe its
// first request, may still be unread then, and closing a socket over unread
// input resets the connection: a client that writes next sees "connection
// reset by peer" instead of the alert that says what was wrong. So the
// socket is shut for writing, after the alert, and its input read and
// dropped until the client closes, for at most lingerBytes and lingerTime;
// the owner never lets that pass its io-timeout from the accept.
const (
	lingerBytes = 64 << 10
	lingerTime  = 250 * time.Millisecond
)

// handshake is what a session holds while its handshake runs: what passes
// between the loop and the handshake goroutine, one job a field.
type handshake struct {
	input  pipe         // the client's bytes, loop → goroutine
	budget inputBudget  // how many of them the client may send now
	cpu    cpuSlot      // the goroutine's compute slot; only the goroutine touches it
	clock  turnClock    // whose turn it is; only the loop touches it
	result chan outcome // goroutine → loop, once
	got    *outcome     // the result once the loop has taken it; only the loop touches it

	remote net.Addr // the client's, read on the loop, for Config.Failed
	wake   func()   // asks the loop for a turn of this session
}

// outcome is a handshake's result.
type outcome struct {
	identity string
	err      error
}

func newHandshake(slots cpuSlots, remote net.Addr, wake func()) *handshake {
	hs := &handshake{
		cpu:    cpuSlot{slots: slots},
		result: make(chan outcome, 1),
		remote: remote,
		wake:   wake,
	}
	hs.input.ready = make(chan struct{}, 1)
	return hs
}

// Read is crypto/tls's read of the client's bytes, on the handshake
// goroutine. It gives up its compute slot while it waits for input, and
// takes one before it works on any.
func (hs *handshake) Read(p []byte) (int, error) {
	for {
		n, closed := hs.input.take(p)
		switch {
		case closed:
			hs.cpu.release()
			return 0, net.ErrClosed
		case n > 0:
			hs.cpu.hold() // a wait for the CPU, never for a client
			return n, nil
		}
		if hs.cpu.release() {
			// The server's turn ends: a turn of the loop's marks the
			// client's with its time (HandshakeTurn).
			hs.wake()
		}
		hs.input.wait()
	}
}

// finish hands the result to the loop, on the handshake goroutine.
func (hs *handshake) finish(identity string, err error) {
	hs.cpu.release()
	hs.result <- outcome{identity: identity, err: err}
}

// finished reports whether the goroutine has finished, on the loop.
func (hs *handshake) finished() bool {
	if hs.got == nil {
		select {
		case o := <-hs.result:
			hs.got = &o
		default:
		}
	}
	return hs.got != nil
}

// HandshakeTurn serves the session in a turn of the loop's, at the turn's
// time now, until its handshake is done. shuttingDown says the server is
// shutting down: no handshake starts.
func (c *Conn) HandshakeTurn(now time.Duration, shuttingDown bool) Event {
	switch c.phase {
	case phaseHello:
		buf, _ := c.Conn.Peek(-1)
		arrived, err := HelloArrived(buf)
		switch {
		case err != nil:
			return Event{Kind: Closed, Err: err}
		case !arrived && len(buf) > MaxHelloBuffered:
			return Event{Kind: Closed, Err: ErrHelloTooLarge}
		case len(buf) > MaxHelloBuffered: // a hello and more than its bound's worth after it
			return Event{Kind: Closed, Err: ErrFlightTooLarge}
		case !arrived:
			return Event{} // the partial hello stays in gnet's buffer
		case shuttingDown:
			return Event{Kind: Closed, Err: ErrShuttingDown}
		}
		c.start(buf, now)
	case phaseHandshake:
		return c.handshakeTurn(now)
	case phaseRefused:
		c.lingered += c.Conn.InboundBuffered()
		_, _ = c.Conn.Discard(-1)
		if c.lingered > lingerBytes {
			return Event{Kind: Closed, Err: ErrLingered}
		}
	}
	return Event{}
}

// start starts the handshake goroutine with the whole ClientHello.
func (c *Conn) start(hello []byte, now time.Duration) {
	l := c.loop
	gc := c.Conn
	hs := newHandshake(l.slots, gc.RemoteAddr(), func() { _ = gc.Wake(nil) })
	hs.budget.spend(len(hello)) // within MaxHelloBuffered: HandshakeTurn made sure
	hs.input.feed(hello)
	hs.clock.serverTurn(now)
	_, _ = gc.Discard(len(hello))
	c.tr.hs = hs
	c.phase = phaseHandshake
	c.tls = tls.Server(&c.tr, l.cfg.TLS)
	l.wg.Add(1)
	go c.handshake(hs)
}

// handshakeTurn is a turn while the goroutine runs the handshake.
func (c *Conn) handshakeTurn(now time.Duration) Event {
	hs := c.tr.hs
	if !hs.finished() {
		buf, _ := c.Conn.Peek(-1)
		_, _ = c.Conn.Discard(len(buf))
		switch {
		case len(buf) > 0:
			if !hs.budget.spend(len(buf)) {
				return Event{Kind: Closed, Err: ErrFlightTooLarge} // Abort stops the goroutine
			}
			hs.input.feed(buf)
			hs.clock.serverTurn(now) // the client's flight is here: waiting for a slot is the server's
		case hs.input.idle():
			hs.clock.clientTurn(now)
		}
		return Event{}
	}
	hs.clock.clientTurn(now) // the ACQUIRE is the client's to send
	if c.tr.asyncWrites.Load() > 0 {
		// The handshake has finished but its last flight (with mutual
		// TLS, the session ticket) is still in gnet's queue: the records
		// the session would write now must not overtake it. gnet writes
		// the queue before it runs the handshake's wake-up, whose turn
		// takes the client's bytes from gnet's buffer then.
		return Event{}
	}
	c.tr.hs, c.tr.left = nil, nil
	if rest := hs.input.rest(); len(rest) > 0 { // keep the bytes, not the handshake's whole input buffer
		c.tr.left = bytes.Clone(rest)
	}
	if err := hs.got.err; err != nil {
		return c.refuse(err)
	}
	c.phase, c.peerID = phaseOpen, hs.got.identity
	c.tr.opened()
	return Event{Kind: Opened, Identity: c.peerID, ServerTime: hs.clock.ended}
}

// refuse lets the client read the alert crypto/tls sent before the
// connection closes.
func (c *Conn) refuse(err error) Event {
	c.phase = phaseRefused
	ev := Event{Kind: Refused, Err: err}
	if c.Conn.OutboundBuffered() > 0 || c.loop.ctx.Err() != nil {
		return ev
	}
	if unix.Shutdown(c.Conn.Fd(), unix.SHUT_WR) != nil {
		return ev
	}
	_, _ = c.Conn.Discard(-1)
	ev.Linger = lingerTime
	return ev
}

// handshake is the handshake goroutine: it runs the TLS handshake of one
// connection once its ClientHello has arrived, and hands the result back to
// the loop. Loop.Stop can cut it short; the session's io-timeout, on the
// loop, closes the connection (Abort) and so ends it too.
func (c *Conn) handshake(hs *handshake) {
	l := c.loop
	defer l.wg.Done()
	err := c.tls.HandshakeContext(l.ctx)
	if err != nil && l.cfg.Failed != nil {
		// Here, not on the loop: the client may read the alert and close
		// before the loop picks up the result.
		l.cfg.Failed(hs.remote, err)
	}
	identity := ""
	if err == nil && l.cfg.Identity != nil {
		identity = l.cfg.Identity(c.tls.ConnectionState())
	}
	hs.finish(identity, err)
	// The loop picks the result up in a turn. Wake queues behind the
	// writes of the handshake's last flight, so they are out first.
	l.wg.Add(1)
	if c.Conn.Wake(func(gnet.Conn, error) error {
		l.wg.Done()
		return nil
	}) != nil {
		l.wg.Done()
	}
}

// Abort is the connection's end, in OnClose, before the handshake is done:
// its goroutine, if any, stops waiting for input. cutShort reports that a
// handshake was under way (not refused, not done): one that failed.
func (c *Conn) Abort() (cutShort bool) {
	switch c.phase {
	case phaseHello:
		return true
	case phaseHandshake:
		c.tr.hs.input.close()
		return true
	}
	return false
}
