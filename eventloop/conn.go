package eventloop

import (
	"net"

	"github.com/panjf2000/gnet/v2"
)

// conn is what the owner uses of a connection: its inbound bytes, its
// outbound buffer and a way to ask for another turn. A plain gnet.Conn is
// one as it is; a TLS session is a tlsConn that decrypts and encrypts around
// a gnet.Conn; the owner's tests use a fake. Keeping the owner to this small
// set is what lets its rules run without sockets.
type conn interface {
	// Peek returns the bytes received and not yet discarded; n <= 0 means all.
	Peek(n int) ([]byte, error)
	// Discard drops the first n bytes of what Peek returned.
	Discard(n int) (int, error)
	// Write sends p or buffers what the socket does not take at once. A
	// write that fails closes the connection, running onClose first.
	Write(p []byte) (int, error)
	// OutboundBuffered is how many written bytes the peer has not drained.
	OutboundBuffered() int
	// Wake queues another OnTraffic turn after the sessions already waiting.
	Wake(callback gnet.AsyncCallback) error
	SetContext(ctx any)
	RemoteAddr() net.Addr
}

// closeNower is a conn that closes itself at once, running onClose before it
// returns: a TLS session (which first sends close_notify) or a test fake.
type closeNower interface {
	closeNow() error
}

// closeConn closes c from the owner's side and runs onClose before it
// returns. gnet.Conn.Close only queues the close; the loop's own Close is
// synchronous, which keeps the owner's bookkeeping in one step.
func closeConn(c conn) error {
	if cn, ok := c.(closeNower); ok {
		return cn.closeNow()
	}
	gc := c.(gnet.Conn)
	return gc.EventLoop().Close(gc)
}
