package eventloop

import (
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/monolock/monolock/eventloop/timerwheel"
	"github.com/monolock/monolock/locktable"
)

// session is one connection: one claim on one lock. Times are offsets on the
// owner's monotonic clock (see owner.now); zero means "not set".
type session struct {
	conn  gnet.Conn
	claim locktable.Claim  // Value is the session
	timer timerwheel.Timer // Value is the session; one timer covers every deadline

	lease    time.Duration // chosen by the client in ACQUIRE; zero before it
	openedAt time.Duration // an ACQUIRE must complete within io-timeout of this
	lastSeen time.Duration // the last valid ACQUIRE or HEARTBEAT

	partialSince time.Duration // a frame began arriving and is not complete
	stalledSince time.Duration // output has been waiting for the peer to drain
	stalledBytes int           // output pending when last seen draining
	backlogged   bool          // input left unparsed while output is stalled

	closeReason closeReason // why the server closed it; graceful when the peer did
	closed      bool        // OnClose has run: never write to conn again

	prev, next *session // the owner's list of open sessions
}

// registered reports whether the session has sent its ACQUIRE.
func (s *session) registered() bool { return s.lease != 0 }

// closeReason says why a session ended. Lock releases are counted and audited
// by it.
type closeReason uint8

const (
	reasonGraceful      closeReason = iota // the client closed its connection
	reasonExpired                          // no heartbeat within the lease
	reasonIOTimeout                        // io-timeout: no ACQUIRE, half-sent frame, output not drained
	reasonProtocolError                    // the client broke the protocol and was sent ERROR
	reasonShutdown                         // the server is shutting down
)

func (r closeReason) String() string {
	switch r {
	case reasonGraceful:
		return "graceful"
	case reasonExpired:
		return "expired"
	case reasonIOTimeout:
		return "io_timeout"
	case reasonProtocolError:
		return "protocol_error"
	case reasonShutdown:
		return "shutdown"
	}
	return "unknown"
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
