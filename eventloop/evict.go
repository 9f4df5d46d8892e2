package eventloop

import "time"

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
