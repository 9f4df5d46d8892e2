package eventloop

import (
	"net"
	"net/netip"
	"time"

	"github.com/monolock/monolock/eventloop/timerwheel"
	"github.com/monolock/monolock/locktable"
)

// session is one connection: one claim on one lock. Times are offsets on the
// owner's monotonic clock (see owner.begin); zero means "not set".
type session struct {
	conn  conn                       // a gnet.Conn, or a *tlsSession around one
	claim locktable.Claim[*session]  // Value is the session
	timer timerwheel.Timer[*session] // Value is the session; one timer covers every deadline

	since    time.Duration // when opened, then when queued, then when granted
	lastSeen time.Duration // the last valid ACQUIRE or HEARTBEAT; before ACQUIRE, the last input (or the accept)

	partialSince time.Duration // a frame began arriving and is not complete
	stalledSince time.Duration // output has been waiting for the peer to drain
	unchecked    uint32        // bytes written since the kernel's send queue was last looked at
	acked        uint32        // low 32 bits of the bytes the peer had acknowledged at that look (see lookAtKernel)
	leaseMS      uint32        // chosen by the client in ACQUIRE; zero before it
	backlogged   bool          // input left unparsed while output is stalled
	holds        bool          // it has been granted its lock: its source no longer counts it (sources.go)

	closing     bool                    // the server decided to close it; ignore further input
	closeReason locktable.ReleaseReason // why it ended; graceful when the client closed
	closed      bool                    // OnClose has run: never touch conn again

	at  [2]links // its places in the owner's list of open sessions and in its source's
	src *source  // its source (sources.go)
}

// links are a session's place in one list of sessions.
type links struct{ prev, next *session }

// A session is in two lists: every open session (sessionList), and, while
// it is not a holder, its source's (sources.go). These index session.at.
const (
	everySession = iota
	bySource
)

// chain is a list of sessions, its links in the sessions themselves, so
// that joining and leaving it allocate nothing and cost the same anywhere
// in it.
type chain struct{ head, tail *session }

// link puts s after prev in list, or at its head when prev is nil.
func (c *chain) link(s, prev *session, list int) {
	at := &s.at[list]
	at.prev = prev
	if prev != nil {
		at.next, prev.at[list].next = prev.at[list].next, s
	} else {
		at.next, c.head = c.head, s
	}
	if at.next != nil {
		at.next.at[list].prev = s
	} else {
		c.tail = s
	}
}

// unlink takes s out of list.
func (c *chain) unlink(s *session, list int) {
	at := &s.at[list]
	if at.prev != nil {
		at.prev.at[list].next = at.next
	} else {
		c.head = at.next
	}
	if at.next != nil {
		at.next.at[list].prev = at.prev
	} else {
		c.tail = at.prev
	}
	*at = links{}
}

// sec is the session's security layer: the connection itself when it has
// one (a *tlsSession), else plain TCP's, which is none. It is looked up rather
// than kept, because a session is kept small: there are tens of thousands.
func (s *session) sec() security {
	if sc, ok := s.conn.(security); ok {
		return sc
	}
	return plainTCP{}
}

// registered reports whether the session has sent its ACQUIRE.
func (s *session) registered() bool { return s.leaseMS != 0 }

// lease returns the lease the client chose.
func (s *session) lease() time.Duration { return time.Duration(s.leaseMS) * time.Millisecond }

// expiresAt is when the lease ends without a heartbeat: strictly after
// lastSeen plus the lease, so a heartbeat at the last moment keeps the lock.
func (s *session) expiresAt() time.Duration { return s.lastSeen + s.lease() + 1 }

// remoteAddr returns the client's address as text, for the admin API, the
// audit log and logs. Not kept in the session: most sessions never need it.
// Valid until onClose returns.
func (s *session) remoteAddr() string {
	addr := s.conn.RemoteAddr()
	if addr == nil {
		return ""
	}
	return addr.String()
}

// hasAddr reports whether the client's address, as remoteAddr shows it, is
// addr, without formatting it.
func (s *session) hasAddr(addr netip.AddrPort) bool {
	tcp, ok := s.conn.RemoteAddr().(*net.TCPAddr)
	if !ok || tcp == nil {
		return false
	}
	ap := tcp.AddrPort() // String shows an IPv4 client of a dual-stack socket as IPv4
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()) == addr
}

// sessionList is an intrusive list of every open session, so that shutdown
// can reach them all without a map. It is kept in three runs, so that the
// ones to close at the descriptor limit (release.go) are found at once
// without a second list, and two pointers, in every session: the holders
// first, in no order; then the waiters, from waiting on, the one heard from
// longest ago first; then the sessions still waiting for their ACQUIRE, from
// pending on, also the one heard from longest ago (or accepted, if it has
// sent nothing) first.
type sessionList struct {
	chain
	waiting    *session // the first waiter: the one silent longest; nil when none
	pending    *session // the first session without ACQUIRE: the one silent longest
	len        int
	pendingLen int
	sources    sourceTable // the sessions that are not holders, by source
}

// add appends a new session, which has not sent its ACQUIRE, from source
// key.
func (l *sessionList) add(s *session, key sourceKey) {
	l.sources.join(s, key)
	l.link(s, l.tail, everySession)
	if l.pending == nil {
		l.pending = s
	}
	l.len++
	l.pendingLen++
}

// acquired moves s, which has just sent its ACQUIRE, out of the sessions
// still waiting for theirs: to the holders, or to the back of the waiters.
func (l *sessionList) acquired(s *session, holding bool) {
	l.pendingLen--
	if holding {
		l.promoted(s)
	} else {
		l.heard(s)
	}
}

// heard moves a waiter that has just sent a frame to the back of the
// waiters: the front is then always the one silent longest.
func (l *sessionList) heard(s *session) {
	l.detach(s)
	prev := l.tail
	if l.pending != nil {
		prev = l.pending.at[everySession].prev
	}
	l.link(s, prev, everySession)
	if l.waiting == nil {
		l.waiting = s
	}
}

// heardBeforeAcquire moves s, which has not sent its ACQUIRE and has just
// sent something, to the back of the sessions still waiting for theirs.
func (l *sessionList) heardBeforeAcquire(s *session) {
	l.detach(s)
	l.link(s, l.tail, everySession)
	if l.pending == nil {
		l.pending = s
	}
}

// promoted moves s, granted its lock, to the holders.
func (l *sessionList) promoted(s *session) {
	l.sources.holds(s)
	l.detach(s)
	l.link(s, nil, everySession)
}

// remove forgets a closed session; registered says whether it had sent
// its ACQUIRE.
func (l *sessionList) remove(s *session, registered bool) {
	l.sources.leave(s)
	l.detach(s)
	l.len--
	if !registered {
		l.pendingLen--
	}
}

// detach unlinks s and moves the run markers that pointed at it on.
func (l *sessionList) detach(s *session) {
	next := s.at[everySession].next
	if l.pending == s {
		l.pending = next
	}
	if l.waiting == s {
		l.waiting = next
		if l.waiting == l.pending { // s was the last waiter
			l.waiting = nil
		}
	}
	l.unlink(s, everySession)
}
