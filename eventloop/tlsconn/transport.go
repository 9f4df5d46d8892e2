package tlsconn

import (
	"encoding/binary"
	"net"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// transport is the net.Conn under the tls.Conn: during the handshake, the
// client's bytes the loop passes to the handshake goroutine, and gnet's
// AsyncWrite; afterwards gnet's buffers. crypto/tls keeps a connection
// usable when its transport reports a temporary error, so "no more
// ciphertext yet" is simply that error, and the next turn carries on where
// this one stopped.
//
// It hands crypto/tls at most one record at a time, reading the record
// headers as they pass. So once tls has returned a record's plaintext it
// holds no ciphertext it has not decrypted, and when gnet holds none either
// the loop need not ask tls for more: that question, answered "no more input
// yet", costs crypto/tls an allocation every time.
type transport struct {
	gc   gnet.Conn
	hs   *handshake // while the handshake runs
	left []byte     // input the handshake did not read: the session's first records

	// asyncWrites counts the handshake's writes that gnet has queued and
	// not yet written. The session writes nothing of its own while any is
	// queued: a session ticket the handshake sends last must reach the client
	// before the first record the loop encrypts after it.
	asyncWrites atomic.Int32

	recordLeft int                   // bytes of the current record not handed over yet
	header     [RecordHeaderLen]byte // a header being handed over piecemeal
	headerHave int                   // how much of header has been handed over

	// What the session's bounds count (bounds.go), in the loop.
	turnBytes  int  // the most ciphertext one turn hands over (Config.TurnBytes)
	handed     int  // ciphertext bytes handed to crypto/tls
	records    int  // whole records handed to crypto/tls
	turnStart  int  // handed when this turn began
	appAt      int  // handed when application data last came out
	appRecords int  // records when application data last came out
	throttled  bool // this turn's ciphertext is used up and more is waiting
}

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

func (t *transport) Read(p []byte) (int, error) {
	p = p[:min(len(p), transportChunk)]
	if t.hs == nil {
		if err := t.withinBounds(); err != nil {
			return 0, err
		}
	}
	if t.recordLeft == 0 && t.headerHave == 0 && t.hs == nil && len(t.left) == 0 {
		// In the loop the header can be read ahead, so that a record that has
		// arrived whole is handed over in one piece.
		h, err := t.gc.Peek(RecordHeaderLen)
		if err != nil {
			return 0, errNoInput // not even a whole header yet
		}
		t.recordLeft = RecordHeaderLen + int(binary.BigEndian.Uint16(h[3:]))
	}
	if t.recordLeft == 0 {
		// The handshake's input cannot be read ahead: hand the header over alone and
		// learn the record's length from it.
		n, err := t.read(p[:RecordHeaderLen-t.headerHave])
		t.handed += n
		t.headerHave += copy(t.header[t.headerHave:], p[:n])
		if t.headerHave == RecordHeaderLen {
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
func (t *transport) read(p []byte) (int, error) {
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
func (t *transport) drained() bool {
	return t.recordLeft == 0 && t.headerHave == 0 && len(t.left) == 0 && t.gc.InboundBuffered() == 0
}

// Write hands the handshake's flights to gnet from the handshake goroutine
// (AsyncWrite; crypto/tls reuses p), and records to gnet directly in the loop.
func (t *transport) Write(p []byte) (int, error) {
	if t.hs == nil {
		return t.gc.Write(p)
	}
	t.hs.budget.serverSent(p)
	t.asyncWrites.Add(1)
	hs := t.hs
	written := func(gc gnet.Conn, _ error) error { // on the loop
		if t.asyncWrites.Add(-1) == 0 && t.hs != nil && hs.finished() {
			// The handshake's wake-up may have run before this write
			// (gnet serves its queues in one pass): wake once more so the
			// client's first records, held back meanwhile, are read.
			_ = gc.Wake(nil)
		}
		return nil
	}
	if err := t.gc.AsyncWrite(append([]byte(nil), p...), written); err != nil {
		t.asyncWrites.Add(-1)
		return 0, err
	}
	return len(p), nil
}

// Close stops the handshake (crypto/tls closes its transport when the
// handshake's context ends); afterwards the loop closes the connection.
func (t *transport) Close() error {
	if t.hs != nil {
		t.hs.input.close()
	}
	return nil
}

func (t *transport) LocalAddr() net.Addr  { return t.gc.LocalAddr() }
func (t *transport) RemoteAddr() net.Addr { return t.gc.RemoteAddr() }

// Deadlines do nothing: the session's io-timeout, on the loop, bounds the
// handshake, and in the loop nothing blocks.
func (t *transport) SetDeadline(time.Time) error      { return nil }
func (t *transport) SetReadDeadline(time.Time) error  { return nil }
func (t *transport) SetWriteDeadline(time.Time) error { return nil }
