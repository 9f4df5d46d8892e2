package tlsconn

import (
	"crypto/tls"
	"errors"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// Conn is a TLS session as the loop's owner sees it: plaintext, read and
// written through the gnet.Conn that carries its ciphertext. Until its
// handshake is done (HandshakeTurn) it reads and writes nothing for the
// owner. Every method runs on the loop.
type Conn struct {
	gnet.Conn // the TCP connection

	loop     *Loop
	phase    phase
	tls      *tls.Conn      // from the ClientHello on
	now      *time.Duration // the owner's turn's time, for the control-record rate
	control  controlRate
	peerID   string // from the verified client certificate; "" without one
	lingered int    // input dropped after a refused handshake

	rest []byte // plaintext left unparsed by the last turn (a partial frame); usually nil
	peek []byte // what the last Peek returned, until Discard

	tr transport // tls's transport; kept inline to save an allocation
}

// Join attaches the session to the loop's connection gc, in OnOpen right
// after the accept. now is the owner's turn's time, which the session reads
// in the turns that read its records.
func (c *Conn) Join(gc gnet.Conn, now *time.Duration) {
	c.Conn = gc
	c.tr.gc = gc
	c.now = now
}

// Ready reports whether the handshake is done: the session carries the
// owner's bytes.
func (c *Conn) Ready() bool { return c.phase == phaseOpen }

// Handshaking reports whether a goroutine runs the session's handshake.
func (c *Conn) Handshaking() bool { return c.phase == phaseHandshake }

// Identity is the client's, from its verified certificate; "" without one.
func (c *Conn) Identity() string { return c.peerID }

// ServerTurns is, while the goroutine runs the handshake, how much of it so
// far was the server's turn, and whether it is the server's turn now
// (turnClock).
func (c *Conn) ServerTurns() (ended time.Duration, now bool) {
	if c.phase != phaseHandshake || c.tr.hs == nil {
		return 0, false
	}
	return c.tr.hs.clock.ended, c.tr.hs.clock.server
}

// Peek decrypts what has arrived and returns the plaintext not yet parsed,
// including any a previous turn left. The slice is the loop's scratch buffer
// and is valid until the next Peek of any session. A non-nil error means the
// stream has ended after the returned bytes: the client sent close_notify
// (io.EOF), or something crypto/tls or the session's bounds refused.
//
// One turn decrypts at most Config.TurnBytes of ciphertext; what is left
// waits for another turn, after the sessions already waiting.
func (c *Conn) Peek(int) ([]byte, error) {
	buf := append(c.loop.scratch[:0], c.rest...)
	c.tr.turnStart, c.tr.throttled = c.tr.handed, false
	var err error
	for len(buf) < cap(buf) {
		var n int
		records := c.tr.records
		n, err = c.tls.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		control := c.tr.records - records // records that yielded no application data
		if n > 0 {
			c.tr.appAt, c.tr.appRecords = c.tr.handed, c.tr.records
			control = max(control-1, 0)
		}
		if control > 0 && !c.control.spend(control, *c.now) {
			err = errControlRate
			break
		}
		if err != nil || c.tr.drained() {
			// Drained: tls returned less than it was asked for, so it keeps
			// no plaintext, and the transport says it keeps no ciphertext.
			break
		}
	}
	if errors.Is(err, errNoInput) {
		err = nil
	}
	if c.tr.throttled && err == nil {
		_ = c.Wake(nil)
	}
	c.peek = buf
	return buf, err
}

// Discard keeps what Peek returned beyond the first n bytes for the next
// turn: a frame cut in two by a record boundary, or input left while the
// peer's output is backlogged.
func (c *Conn) Discard(n int) (int, error) {
	left := c.peek[n:]
	switch {
	case len(left) == 0:
		c.rest = nil
	default:
		c.rest = append(c.rest[:0], left...)
	}
	c.peek = nil
	return n, nil
}

// Write encrypts p into one record and hands it to gnet. Before the
// handshake is done there is no session to write to, and p is dropped.
func (c *Conn) Write(p []byte) (int, error) {
	if c.phase != phaseOpen {
		return len(p), nil
	}
	if _, err := c.tls.Write(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// CloseNotify tells the client the session ends, so that it can tell a
// deliberate close from a cut connection.
func (c *Conn) CloseNotify() {
	if c.phase == phaseOpen {
		_ = c.tls.CloseWrite()
	}
}

// CloseNow closes the connection at once (close_notify is already out);
// OnClose has run when it returns.
func (c *Conn) CloseNow() error {
	return c.EventLoop().Close(c.Conn)
}
