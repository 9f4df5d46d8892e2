package eventloop

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/monolock/monolock/eventloop/tlsconn"
)

// A TLS session lives in the event loop like a plain one: one descriptor, no
// goroutine. Only its handshake, which crypto/tls cannot suspend and resume,
// runs on a goroutine of its own (handshake_loop.go); then the tls.Conn's
// transport switches to gnet's buffers. crypto/tls keeps a connection usable
// when its transport reports a temporary error, so "no more ciphertext yet"
// is simply that error, and the next OnTraffic carries on where this one
// stopped.

// tlsConn is a TLS session as the owner sees it: the conn interface over
// plaintext, built on the gnet.Conn that carries ciphertext. Until its
// handshake is done (phase), it reads and writes nothing for the owner.
type tlsConn struct {
	gnet.Conn // the TCP connection

	phase    tlsPhase
	tls      *tls.Conn      // from the ClientHello on
	now      *time.Duration // the owner's turn's now, for the control-record rate
	control  controlRate
	peerID   string  // from the verified client certificate; "" without one
	scratch  *[]byte // the loop's plaintext buffer, shared by every session
	lingered int     // input dropped after a refused handshake

	rest []byte // plaintext left unparsed by the last turn (a partial frame); usually nil
	peek []byte // what the last Peek returned, until Discard

	tr tlsTransport // tls's transport; kept inline to save an allocation
}

// tlsTransport is the net.Conn under the tls.Conn: during the handshake, the
// input the loop copies to the handshake goroutine, and gnet's AsyncWrite;
// afterwards gnet's buffers.
//
// It hands crypto/tls at most one record at a time, reading the record
// headers as they pass. So once tls has returned a record's plaintext it
// holds no ciphertext it has not decrypted, and when gnet holds none either
// the loop need not ask tls for more: that question, answered "no more input
// yet", costs crypto/tls an allocation every time.
type tlsTransport struct {
	gc   gnet.Conn
	hs   *handshakeInput // during the handshake
	left []byte          // input the handshake did not read: the session's first records

	// asyncWrites counts the handshake's writes that gnet has queued and
	// not yet written. The loop writes nothing of its own while any is
	// queued: a session ticket the handshake sends last must reach the client
	// before the first record the loop encrypts after it.
	asyncWrites atomic.Int32

	recordLeft int                   // bytes of the current record not handed over yet
	header     [recordHeaderLen]byte // a header being handed over piecemeal
	headerHave int                   // how much of header has been handed over

	// What the session's bounds count (tlsbounds.go), in the loop.
	handed     int  // ciphertext bytes handed to crypto/tls
	records    int  // whole records handed to crypto/tls
	turnStart  int  // handed when this turn began
	appAt      int  // handed when application data last came out
	appRecords int  // records when application data last came out
	throttled  bool // this turn's ciphertext is used up and more is waiting
}

const recordHeaderLen = tlsconn.RecordHeaderLen

// errNoInput is what the transport says when gnet holds no more ciphertext.
// It is a temporary net.Error, which crypto/tls treats as "try again later"
// without failing the connection.
var errNoInput net.Error = noInput{}

type noInput struct{}

func (noInput) Error() string   { return "no more input yet" }
func (noInput) Timeout() bool   { return true }
func (noInput) Temporary() bool { return true }

// transportChunk is the most ciphertext one transport Read hands crypto/tls.
// tls reads until it has a whole record, so small reads keep its input
// buffer, which it keeps for the session's life, near one record's size
// instead of everything a pipelining client has sent.
const transportChunk = 512

func (t *tlsTransport) Read(p []byte) (int, error) {
	p = p[:min(len(p), transportChunk)]
	if t.hs == nil {
		if err := t.withinBounds(); err != nil {
			return 0, err
		}
	}
	if t.recordLeft == 0 && t.headerHave == 0 && t.hs == nil && len(t.left) == 0 {
		// In the loop the header can be read ahead, so that a record that has
		// arrived whole is handed over in one piece.
		h, err := t.gc.Peek(recordHeaderLen)
		if err != nil {
			return 0, errNoInput // not even a whole header yet
		}
		t.recordLeft = recordHeaderLen + int(binary.BigEndian.Uint16(h[3:]))
	}
	if t.recordLeft == 0 {
		// The handshake's input cannot be read ahead: hand the header over alone and
		// learn the record's length from it.
		n, err := t.read(p[:recordHeaderLen-t.headerHave])
		t.handed += n
		t.headerHave += copy(t.header[t.headerHave:], p[:n])
		if t.headerHave == recordHeaderLen {
			t.recordLeft = int(binary.BigEndian.Uint16(t.header[3:]))
			t.headerHave = 0
		}
		return n, err
	}
	n, err := t.read(p[:min(len(p), t.recordLeft)])
	t.recordLeft -= n
	t.handed += n
	if n > 0 && t.recordLeft == 0 {
		t.records++
	}
	return n, err
}

// read reads the handshake's input, then what it left, then gnet's buffers.
func (t *tlsTransport) read(p []byte) (int, error) {
	switch {
	case t.hs != nil:
		return t.hs.Read(p)
	case len(t.left) > 0:
		n := copy(p, t.left)
		t.left = t.left[n:]
		if len(t.left) == 0 {
			t.left = nil
		}
		return n, nil
	case t.gc.InboundBuffered() == 0:
		return 0, errNoInput
	}
	return t.gc.Read(p)
}

// drained reports whether every byte that has arrived has been decrypted:
// gnet holds none and the last record handed to crypto/tls was whole.
func (t *tlsTransport) drained() bool {
	return t.recordLeft == 0 && t.headerHave == 0 && len(t.left) == 0 && t.gc.InboundBuffered() == 0
}

// Write hands the handshake's flights to gnet from the handshake goroutine
// (AsyncWrite; crypto/tls reuses p), and records to gnet directly in the loop.
func (t *tlsTransport) Write(p []byte) (int, error) {
	if t.hs != nil {
		t.hs.serverWrote(p)
		t.asyncWrites.Add(1)
		written := func(gc gnet.Conn, _ error) error { // on the loop
			if t.asyncWrites.Add(-1) == 0 && t.hs != nil {
				// The handshake's wake-up may have run before this write
				// (gnet serves its queues in one pass): wake once more so the
				// client's first records, held back meanwhile, are read.
				if _, _, done, _ := t.hs.result(); done {
					_ = gc.Wake(nil)
				}
			}
			return nil
		}
		if err := t.gc.AsyncWrite(append([]byte(nil), p...), written); err != nil {
			t.asyncWrites.Add(-1)
			return 0, err
		}
		return len(p), nil
	}
	return t.gc.Write(p)
}

// Close stops the handshake (crypto/tls closes its transport when the
// handshake's context ends); afterwards the owner closes the connection.
func (t *tlsTransport) Close() error {
	if t.hs != nil {
		t.hs.close()
	}
	return nil
}

func (t *tlsTransport) LocalAddr() net.Addr  { return t.gc.LocalAddr() }
func (t *tlsTransport) RemoteAddr() net.Addr { return t.gc.RemoteAddr() }

// Deadlines do nothing: the session's io-timeout, on the loop, bounds the
// handshake, and in the loop nothing blocks.
func (t *tlsTransport) SetDeadline(time.Time) error      { return nil }
func (t *tlsTransport) SetReadDeadline(time.Time) error  { return nil }
func (t *tlsTransport) SetWriteDeadline(time.Time) error { return nil }

// join attaches the session to the loop's connection gc. It runs on the
// loop, in OnOpen, right after the accept.
func (c *tlsConn) join(gc gnet.Conn, now *time.Duration) {
	c.Conn = gc
	c.tr.gc = gc
	c.now = now
}

// The session's security (conn.go).
func (c *tlsConn) ready() bool       { return c.phase == phaseOpen }
func (c *tlsConn) handshaking() bool { return c.phase == phaseHandshake }
func (c *tlsConn) identity() string  { return c.peerID }

// serverTurns reports the handshake's server turns (handshakeinput.go)
// while a goroutine runs it.
func (c *tlsConn) serverTurns() (time.Duration, bool) {
	if c.phase != phaseHandshake || c.tr.hs == nil {
		return 0, false
	}
	return c.tr.hs.excused()
}

// Peek decrypts what has arrived and returns the plaintext not yet parsed,
// including any a previous turn left. The slice is the loop's scratch buffer
// and is valid until the next Peek of any session. A non-nil error means the
// stream has ended after the returned bytes: the client sent close_notify
// (io.EOF), or something crypto/tls or the session's bounds refused.
//
// One turn decrypts at most bytesPerTurn of ciphertext; what is left waits
// for another turn, after the sessions already waiting.
func (c *tlsConn) Peek(int) ([]byte, error) {
	buf := append((*c.scratch)[:0], c.rest...)
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
func (c *tlsConn) Discard(n int) (int, error) {
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
func (c *tlsConn) Write(p []byte) (int, error) {
	if c.phase != phaseOpen {
		return len(p), nil
	}
	if _, err := c.tls.Write(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// closeNotify tells the client the session ends, so that it can tell a
// deliberate close from a cut connection.
func (c *tlsConn) closeNotify() {
	if c.phase == phaseOpen {
		_ = c.tls.CloseWrite()
	}
}

// closeNow closes the connection at once (close_notify is already out);
// OnClose has run when it returns.
func (c *tlsConn) closeNow() error {
	return c.EventLoop().Close(c.Conn)
}

// tlsLoop is what the loop shares among its TLS sessions.
type tlsLoop struct {
	scratch []byte
}

// newConn is a TLS session for a connection just accepted; OnOpen joins it
// to the loop.
func (l *tlsLoop) newConn() *tlsConn { return &tlsConn{scratch: &l.scratch} }

func newTLSLoop() *tlsLoop {
	// One turn parses at most bytesPerTurn; one more record's plaintext on top
	// lets a turn that stops there know that more is waiting.
	return &tlsLoop{scratch: make([]byte, 0, bytesPerTurn+16<<10)}
}

// isEOF reports whether a Peek error is the client's orderly end.
func isEOF(err error) bool { return errors.Is(err, io.EOF) }
