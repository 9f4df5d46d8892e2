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
	conn  conn                       // a gnet.Conn, or a *tlsConn around one
	sec   security                   // plainTCP{}, or the same *tlsConn
	claim locktable.Claim[*session]  // Value is the session
	timer timerwheel.Timer[*session] // Value is the session; one timer covers every deadline

	since    time.Duration // when opened, then when queued, then when granted
	lastSeen time.Duration // the last valid ACQUIRE or HEARTBEAT

	partialSince time.Duration // a frame began arriving and is not complete
	stalledSince time.Duration // output has been waiting for the peer to drain
	unchecked    int           // bytes written since the kernel's send queue was last looked at
	acked        uint64        // bytes the peer had acknowledged at that look (see lookAtKernel)
	leaseMS      uint32        // chosen by the client in ACQUIRE; zero before it
	backlogged   bool          // input left unparsed while output is stalled

	closing     bool          // the server decided to close it; ignore further input
	closeReason ReleaseReason // why it ended; graceful when the client closed
	closed      bool          // OnClose has run: never touch conn again

	prev, next *session // the owner's list of open sessions

	pending                  bool     // in the owner's list of sessions without ACQUIRE
	pendingPrev, pendingNext *session // that list, oldest first (see evict.go)
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
// can reach them all without a map.
type sessionList struct {
	head *session
	len  int
}

func (l *sessionList) add(s *session) {
	s.next = l.head
	if l.head != nil {
		l.head.prev = s
	}
	l.head = s
	l.len++
}

func (l *sessionList) remove(s *session) {
	if s.prev != nil {
		s.prev.next = s.next
	} else {
		l.head = s.next
	}
	if s.next != nil {
		s.next.prev = s.prev
	}
	s.prev, s.next = nil, nil
	l.len--
}
