package eventloop

import (
	"net"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/monolock/monolock/eventloop/metrics"
	"github.com/monolock/monolock/eventloop/timerwheel"
	"github.com/monolock/monolock/locktable"
)

// session is one connection: one claim on one lock. Times are offsets on the
// owner's monotonic clock (see owner.now); zero means "not set".
type session struct {
	conn  gnet.Conn
	claim locktable.Claim  // Value is the session
	timer timerwheel.Timer // Value is the session; one timer covers every deadline

	remote     net.Addr // the client's address (of the TLS connection, for TLS)
	remoteText string   // remote as text, made on first use
	identity   string   // from the client certificate; empty without mutual TLS

	lease     time.Duration // chosen by the client in ACQUIRE; zero before it
	openedAt  time.Duration // an ACQUIRE must complete within io-timeout of this
	lastSeen  time.Duration // the last valid ACQUIRE or HEARTBEAT
	queuedAt  time.Duration // when the ACQUIRE arrived
	grantedAt time.Duration // when the lock was granted

	partialSince time.Duration // a frame began arriving and is not complete
	stalledSince time.Duration // output has been waiting for the peer to drain
	stalledBytes int           // output pending when last seen draining
	backlogged   bool          // input left unparsed while output is stalled

	closing     bool                  // the server decided to close it; ignore further input
	closeReason metrics.ReleaseReason // why it ended; graceful when the client closed
	closed      bool                  // OnClose has run: never write to conn again

	prev, next *session // the owner's list of open sessions
}

// registered reports whether the session has sent its ACQUIRE.
func (s *session) registered() bool { return s.lease != 0 }

// remoteAddr returns the client's address as text, made once per session and
// only for the admin API, the audit log and logs.
func (s *session) remoteAddr() string {
	if s.remoteText == "" && s.remote != nil {
		s.remoteText = s.remote.String()
	}
	return s.remoteText
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
