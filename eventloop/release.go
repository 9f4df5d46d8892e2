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
	if st := s.claim.State(); st == locktable.Waiting || st == locktable.Pending {
		o.metrics.Dequeued()
	}
	if o.shuttingDown {
		return // no promotion, ever, while shutting down
	}
	// A node whose term ended has no token left (ha.go): the next waiter
	// becomes Pending, never a holder, and is closed with the rest.
	if next := o.table.Release(&s.claim, o.wall); next != nil {
		o.promote(next)
	}
}

// promote tells a waiter it holds its lock now: promoted by a release, or
// a Pending claim issued its token (ha.go).
func (o *owner) promote(c *locktable.Claim[*session]) {
	g := c.Value
	o.metrics.Dequeued()
	o.sessions.promoted(g)
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
	if o.ha.on {
		o.askBlock() // half the block used: reserve the next (ha.go)
	}
}

// released does the bookkeeping of a holder's release. For one lock it always
// runs before the grant to the next holder.
func (o *owner) released(s *session) {
	held := o.now - s.since
	if s.closeReason == locktable.ReleaseExpired {
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
		next := s.at[everySession].next
		if !s.sec().handshaking() { // else told once its handshake finishes (handshake_loop.go)
			o.sendError(s, protocol.CodeShuttingDown, shuttingDownReason)
			o.closeSession(s, locktable.ReleaseShutdown, "")
		}
		s = next
	}
}

// refusal is the answer to a connection that joins during shutdown, or
// while its node does not serve (ha.go), before it is a session: OnOpen
// hands it to gnet, which writes it and closes.
func (o *owner) refusal() []byte {
	o.metrics.ProtocolError(protocol.CodeShuttingDown)
	reason, _ := o.refusalReason()
	return protocol.AppendError(o.out[:0], protocol.CodeShuttingDown, reason)
}

// At the descriptor limit every descriptor may be held by a connection that
// has not sent its ACQUIRE (silent clients, or TLS clients stalled in their
// handshake, each closed only by its io-timeout) or by a waiter that costs
// its client nothing (a huge lease and no heartbeat, so never expired). A
// well-behaved client would then wait in the kernel's backlog until one of
// them ended. So when accept fails for want of descriptors, the accept loop
// asks the owner to close one of them, and accepts again:
//
//  1. The waiter heard from longest ago, if it has sent nothing for
//     Config.WaiterSilenceLimit (a minute by default). A client that follows
//     the protocol heartbeats every lease/4, so with a lease under 4 × that
//     it is never closed for this, and one with a longer lease only after
//     every waiter silent longer than it. Such a waiter ends as if its lease had: closed
//     without an ERROR, its place in the queue given up; the queue's order
//     is otherwise untouched.
//  2. Else, of the connections that have not sent their ACQUIRE, the one
//     silent longest, if it has sent nothing for evictGrace since its accept
//     or its last input. A client that has just been accepted always has
//     time to send its ACQUIRE, and a TLS client whose handshake makes
//     progress is never closed while a silent connection is left, whatever
//     its round trip; a connection at the limit lives at least evictGrace,
//     which also bounds how fast the server turns such connections over
//     (descriptors per evictGrace). Input does not lengthen io-timeout,
//     which counts from the accept: a client that trickles a byte at a time
//     keeps its descriptor for io-timeout at most.
//
// Silent waiters go first: while there are any, no newcomer is closed for
// want of descriptors, however long its TLS handshake takes, and however
// many connections that send nothing compete with it; each of them only
// takes the place of a silent waiter. A holder is never closed for this (its
// lease is what keeps another from working under the same lock), and
// neither is a waiter that heartbeats.
const evictGrace = 250 * time.Millisecond

// evictPending closes a silent waiter or a connection silent too long
// before its ACQUIRE, by the rules above. When it closes none, wait is how
// long until one of them will be closable, or 0 when there is none at all.
//
// Without a door descriptor the accept loop cannot see the newcomer's
// source (admission.go), so this asks what is fair whoever it is: a source
// that leads every other by two or more gives up its newest (rule 1 for a
// newcomer from any other source; one from the source itself gets the
// place back), and the rules above never take from a source with fewer
// than the most. With one source, only the rules above.
func (o *owner) evictPending() (evicted bool, wait time.Duration) {
	t := &o.sessions.sources
	if top := t.top(); top != nil && t.leads(top) {
		o.metrics.ShareEvicted()
		o.closeSession(top.tail, locktable.ReleaseIOTimeout, "closing the newest session of the source with the most that are not holders: no descriptor is left, and it leads every other source by two or more")
		return true, 0
	}
	victim, wait := o.evictable()
	if victim == nil {
		return false, wait
	}
	if victim.src.count < t.most {
		return false, 0
	}
	o.evictSilent(victim)
	return true, 0
}

// evictable returns the session the rules above would close now, or nil
// and how long until one may be closed (0 when none ever will).
func (o *owner) evictable() (victim *session, wait time.Duration) {
	if w := o.sessions.waiting; w != nil {
		silent := o.now - w.lastSeen
		if silent >= o.silence {
			return w, 0
		}
		wait = o.silence - silent
	}
	s := o.sessions.pending
	if s == nil {
		return nil, wait
	}
	if silent := o.now - s.lastSeen; silent < evictGrace {
		if wait == 0 || evictGrace-silent < wait {
			wait = evictGrace - silent
		}
		return nil, wait
	}
	return s, 0
}

// evictSilent closes victim, found by evictable.
func (o *owner) evictSilent(victim *session) {
	if victim.registered() {
		o.metrics.SilentWaiterEvicted()
		o.closeSession(victim, locktable.ReleaseIOTimeout, "closing the waiter silent longest: no descriptor is left for new connections, and it has not heartbeated within -waiter-silence-limit")
		return
	}
	o.metrics.Evicted()
	o.closeSession(victim, locktable.ReleaseIOTimeout, "closing the connection without ACQUIRE silent longest: no descriptor is left for new connections")
}
