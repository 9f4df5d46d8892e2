package eventloop

import (
	"time"

	"github.com/monolock/monolock/locktable"
	"github.com/monolock/monolock/protocol"
)

// This file is how sessions end and locks change hands: the grant's and the
// release's bookkeeping, the release itself with its promotion, and the two
// rules that end sessions in bulk or for want of descriptors (shutdown,
// eviction).
//
// Every way a session ends — the client closes, a protocol error, lease
// expiry, io-timeout, force-release, kick, shutdown, eviction — ends in
// gnet's OnClose, which runs ended, and the turn after it runs forget, the
// only place a waiter is promoted.

// ended records a holder's release while gnet's OnClose runs (see
// owner.closed): the audit event names the holder by its address, and gnet
// forgets that when OnClose returns, before forget's turn when the server
// closed the session (expiry, io-timeout, force-release, shutdown, a failed
// write).
func (o *owner) ended(s *session) {
	if s.claim.State() == locktable.Holding {
		o.released(s)
	}
}

// forget removes a closed session and hands its lock on at once. It is the
// turn that follows gnet's OnClose (see owner.closed), after ended.
func (o *owner) forget(s *session) {
	o.wheel.Stop(&s.timer)
	o.sessions.remove(s, s.registered())
	o.metrics.Closed()
	if s.claim.State() == locktable.Waiting {
		o.metrics.Dequeued()
	}
	if o.shuttingDown {
		return // no promotion, ever, while shutting down
	}
	next := o.table.Release(&s.claim, o.wall)
	if next == nil {
		return
	}
	g := next.Value
	o.metrics.Dequeued()
	o.granted(g)
	o.sendState(g)
}

// granted does the bookkeeping of a grant, first or by promotion: metrics and
// the audit event. Each grant issues one fencing token, which is what
// monolock_acquires_total counts.
func (o *owner) granted(s *session) {
	wait := o.now - s.since
	s.since = o.now
	o.grants++
	o.metrics.Granted(wait)
	o.audit.Granted(o.wall, s.claim.Name(), s.sec().identity(), s.conn.RemoteAddr(), s.claim.Token(), wait)
}

// released does the bookkeeping of a holder's release. For one lock it always
// runs before the grant to the next holder.
func (o *owner) released(s *session) {
	held := o.now - s.since
	if s.closeReason == ReleaseExpired {
		o.expiries++
	}
	o.metrics.Released(s.closeReason, held)
	o.audit.Released(o.wall, s.claim.Name(), s.sec().identity(), s.conn.RemoteAddr(), s.claim.Token(), held, s.closeReason.String())
}

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

// refusal is the answer to a connection that joins during shutdown, before
// it is a session: OnOpen hands it to gnet, which writes it and closes.
func (o *owner) refusal() []byte {
	o.metrics.ProtocolError(protocol.CodeShuttingDown)
	return protocol.AppendError(o.out[:0], protocol.CodeShuttingDown, shuttingDownReason)
}

// At the descriptor limit every descriptor may be held by a connection that
// has not sent its ACQUIRE: silent clients, or TLS clients stalled in their
// handshake, each closed only by its io-timeout. A well-behaved client
// would then wait in the kernel's backlog until one of them timed out. So
// when accept fails for want of descriptors, the accept loop asks the owner
// to close the connection that has waited longest for its ACQUIRE, and
// accepts again. A session that has sent its ACQUIRE (a holder or a waiter)
// is never closed for this, and neither is one younger than evictGrace, so
// that a client that has just been accepted always has time to send its
// ACQUIRE: a connection at the limit lives at least evictGrace, which also
// bounds how fast the server turns connections over (descriptors per
// evictGrace).
//
// A TLS client has to finish its handshake within evictGrace then too, a
// few round trips: on a network whose round trip is a good part of that,
// raise the descriptor limit rather than count on eviction.
const evictGrace = 250 * time.Millisecond

// evictPending closes the session that has waited longest for its ACQUIRE,
// if it has waited at least evictGrace. When it closes none, wait is how
// long until the oldest one will have waited that long, or 0 when none is
// waiting for its ACQUIRE at all.
func (o *owner) evictPending() (evicted bool, wait time.Duration) {
	s := o.sessions.pending
	if s == nil {
		return false, 0
	}
	if age := o.now - s.since; age < evictGrace {
		return false, evictGrace - age
	}
	o.metrics.Evicted()
	o.closeSession(s, ReleaseIOTimeout, "closing the connection that has waited longest for its ACQUIRE: no descriptor is left for new connections")
	return true, 0
}
