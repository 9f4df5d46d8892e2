package eventloop

import (
	"errors"
	"net"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/monolock/monolock/eventloop/tlsconn"
	"github.com/monolock/monolock/protocol"
)

// A TLS connection is enrolled into the loop at accept, like a plain one, and
// is a session from then on: one io-timeout, counted from the accept, covers
// its handshake and its ACQUIRE. Package tlsconn runs the handshake and the
// records; it never calls the owner. Each turn of a session whose handshake
// is not done hands it the turn's time and gets an event back, which this
// file turns into the owner's rules: the session opened (its ACQUIRE's
// io-timeout leaves the server's turns out, and records that came with the
// last flight are read), refused (counted, logged, closed once the client
// has had a moment to read the alert), or to close now.

// tlsSession is a TLS session (tlsconn.Conn) as the loop uses it: a conn
// with the security of conn.go and the handshake of loop_callbacks.go,
// whose methods it names for the loop.
type tlsSession struct{ tlsconn.Conn }

func (t *tlsSession) join(gc gnet.Conn, now *time.Duration) { t.Join(gc, now) }
func (t *tlsSession) ready() bool                           { return t.Ready() }
func (t *tlsSession) handshaking() bool                     { return t.Handshaking() }
func (t *tlsSession) handshakeClosed() bool                 { return t.Abort() }
func (t *tlsSession) identity() string                      { return t.Identity() }
func (t *tlsSession) halfRecord() bool                      { return t.HalfRecord() }
func (t *tlsSession) closeNotify()                          { t.CloseNotify() }
func (t *tlsSession) serverTurns() (time.Duration, bool)    { return t.ServerTurns() }
func (t *tlsSession) closeNow() error                       { return t.CloseNow() }

func (t *tlsSession) handshakeTurn(now time.Duration, shuttingDown bool) tlsconn.Event {
	return t.HandshakeTurn(now, shuttingDown)
}

// newTLSSession is a TLS session for a connection just accepted; OnOpen
// joins it to the loop.
func (s *Server) newTLSSession() *tlsSession {
	t := &tlsSession{}
	s.tlsLoop.Init(&t.Conn)
	return t
}

// handshakeTurn is the owner's turn for a session whose handshake is not
// done: the handshake's event, acted on.
func (h *handler) handshakeTurn(s *session, hs handshaker) gnet.Action {
	o := h.owner
	ev := hs.handshakeTurn(o.now, o.refusing()) // during shutdown, or while the node does not serve (ha.go)
	switch ev.Kind {
	case tlsconn.Closed:
		if !errors.Is(ev.Err, tlsconn.ErrShuttingDown) {
			h.debug(s, ev.Err, "closing a TLS client before its handshake is done")
		}
		return gnet.Close // OnClose counts a handshake cut short and stops its goroutine
	case tlsconn.Refused:
		h.srv.metrics.TLSHandshakeError()
		h.debug(s, ev.Err, "TLS handshake failed")
		if ev.Linger == 0 {
			return gnet.Close
		}
		o.closeBy(s, o.now+ev.Linger) // never later than its io-timeout
	case tlsconn.Opened:
		// The server's turns in the handshake stay out of the ACQUIRE's
		// io-timeout (timers.go).
		s.since += o.excusable(ev.ServerTime)
		if o.refusing() { // told as shutdown (or a term's end) tells every session: effects of this turn
			reason, release := o.refusalReason()
			o.sendError(s, protocol.CodeShuttingDown, reason)
			o.closeSession(s, release, "")
			return gnet.None
		}
		// Records that came with the handshake's last flight (a client that
		// sends ACQUIRE at once) are already inside crypto/tls or left over
		// from the handshake's input: no OnTraffic will announce them.
		o.traffic(s)
	}
	return gnet.None
}

func (h *handler) debug(s *session, err error, msg string) {
	if e := h.srv.log.Debug(); e.Enabled() {
		e.Err(err).Str("remote", s.remoteAddr()).Msg(msg)
	}
}

// chainBound is the error of a TLS configuration (internal/certs') that
// refused a client's certificate chain for crossing one of its bounds,
// named for metrics and the log.
type chainBound interface {
	error
	ChainBound() string
}

// chainRefused counts and logs a handshake refused for a client chain past
// a bound (tlsconn.Config.Failed). It runs on the handshake's goroutine,
// not on the loop, because the client may read the alert and close before
// the loop picks up the result.
func (s *Server) chainRefused(remote net.Addr, err error) {
	var bound chainBound
	if !errors.As(err, &bound) {
		return // the loop logs other failures at debug level
	}
	// Not a client's mistake but a chain no deployment sends: worth a
	// warning, sampled, since whoever sends one retries in a loop.
	s.metrics.TLSChainRefused(bound.ChainBound())
	if e := s.chainLog.Warn(); e.Enabled() {
		e.Err(err).Stringer("remote", remote).Str("bound", bound.ChainBound()).
			Msg("refused a client certificate chain before verifying it (at most one line a second; monolock_tls_client_chains_refused_total counts every one)")
	}
}
