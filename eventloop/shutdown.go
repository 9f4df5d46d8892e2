package eventloop

import (
	"github.com/monolock/monolock/protocol"
)

const shuttingDownReason = "server shutting down: reconnect, the lock service will be back"

// shutdown sends ERROR 0x01 to every session and closes it, promoting no one.
func (o *owner) shutdown() {
	o.shuttingDown = true
	for s := o.sessions.head; s != nil; {
		next := s.next
		if !s.sec().handshaking() { // else told once its handshake finishes (handshake_loop.go)
			o.sendError(s, protocol.CodeShuttingDown, shuttingDownReason)
			o.closeSession(s, ReleaseShutdown, "")
		}
		s = next
	}
}

// refuse answers a connection that joins during shutdown (a TLS handshake
// that finished meanwhile) with ERROR 0x01; the caller closes it.
func (o *owner) refuse(c conn) {
	o.metrics.ProtocolError(protocol.CodeShuttingDown)
	_, _ = c.Write(protocol.AppendError(o.out[:0], protocol.CodeShuttingDown, shuttingDownReason))
}
