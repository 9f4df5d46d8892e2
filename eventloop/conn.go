package eventloop

import (
	"errors"
	"io"
	"net"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// conn is what the owner uses of a connection: its inbound bytes, its
// outbound buffer and a way to ask for another turn. A plain gnet.Conn is
// one as it is; a TLS session is a tlsSession (package tlsconn) that
// decrypts and encrypts around a gnet.Conn; the owner's tests use a fake.
// Keeping the owner to this small set is what lets its rules run without
// sockets.
type conn interface {
	// Peek returns the bytes received and not yet discarded; n <= 0 means all.
	Peek(n int) ([]byte, error)
	// Discard drops the first n bytes of what Peek returned.
	Discard(n int) (int, error)
	// Write sends p or buffers what the socket does not take at once. A
	// write that fails closes the connection, running OnClose first.
	Write(p []byte) (int, error)
	// OutboundBuffered is how many written bytes the peer has not drained.
	OutboundBuffered() int
	// Wake queues another OnTraffic turn after the sessions already waiting.
	Wake(callback gnet.AsyncCallback) error
	SetContext(ctx any)
	RemoteAddr() net.Addr
}

// closeNower is a conn that closes itself at once, running OnClose before it
// returns: a TLS session (whose gnet.Conn is inside) or a test fake.
type closeNower interface {
	closeNow() error
}

// closeConn closes c from the owner's side and runs OnClose before it
// returns. gnet.Conn.Close only queues the close; the loop's own Close is
// synchronous, which keeps the owner's bookkeeping in one step.
func closeConn(c conn) error {
	if cn, ok := c.(closeNower); ok {
		return cn.closeNow()
	}
	gc := c.(gnet.Conn)
	return gc.EventLoop().Close(gc)
}

// security is what the owner's rules ask of a session's transport beyond its
// bytes: nothing for plain TCP (plainTCP); for TLS (tlsSession) the
// client's certificate identity, records, close_notify and the server's
// turns in the handshake. Generic code reaches TLS only through it and
// through handshaker (loop_callbacks.go).
type security interface {
	// identity is the client's certificate identity; "" without mutual TLS.
	identity() string
	// halfRecord reports whether input has arrived that is not yet
	// plaintext: a record or handshake message in part.
	halfRecord() bool
	// closeNotify tells the client the session ends on purpose.
	closeNotify()
	// handshaking reports whether a goroutine runs its handshake; shutdown
	// leaves the session to that handshake's end.
	handshaking() bool
	// serverTurns is how long the handshake so far was the server's turn,
	// and whether it is now (see owner.serverTurns).
	serverTurns() (ended time.Duration, now bool)
}

// plainTCP is the security of a plain TCP session: none.
type plainTCP struct{}

func (plainTCP) identity() string                   { return "" }
func (plainTCP) halfRecord() bool                   { return false }
func (plainTCP) closeNotify()                       {}
func (plainTCP) handshaking() bool                  { return false }
func (plainTCP) serverTurns() (time.Duration, bool) { return 0, false }

// isEOF reports whether a Peek error is the client's orderly end.
func isEOF(err error) bool { return errors.Is(err, io.EOF) }
