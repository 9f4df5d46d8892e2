package eventloop

import (
	"errors"

	"github.com/panjf2000/gnet/v2"
)

// This file is the handshake goroutine: the one piece of a TLS session that
// runs off the loop (see handshake_loop.go for the loop's side, and
// handshakeinput.go for what passes between them).

// handshake runs the TLS handshake of one connection once its ClientHello
// has arrived, and hands the result back to the loop. Shutdown can cut it
// short; the session's io-timeout, on the loop, closes the connection and so
// ends it too.
func (s *Server) handshake(c *tlsConn) {
	defer s.handshakes.wg.Done()
	in := c.tr.hs
	in.serverTurn() // the ClientHello is here
	err := c.tls.HandshakeContext(s.handshakes.ctx)
	if err != nil {
		s.chainRefused(in, err)
	}
	identity := ""
	if err == nil && s.cfg.Identity != nil {
		identity = s.cfg.Identity(c.tls.ConnectionState())
	}
	in.finish(identity, err)
	// The loop picks the result up in OnTraffic. Wake queues behind the
	// writes of the handshake's last flight, so they are out first.
	s.handshakes.wg.Add(1)
	if c.Conn.Wake(func(gnet.Conn, error) error {
		s.handshakes.wg.Done()
		return nil
	}) != nil {
		s.handshakes.wg.Done()
	}
}

// chainRefused counts and logs a handshake refused for a client chain past
// a bound. It runs here, not on the loop, because the client may read the
// alert and close before the loop picks up the result.
func (s *Server) chainRefused(in *handshakeInput, err error) {
	var bound chainBound
	if !errors.As(err, &bound) {
		return // the loop logs other failures at debug level
	}
	// Not a client's mistake but a chain no deployment sends: worth a
	// warning, sampled, since whoever sends one retries in a loop.
	s.metrics.TLSChainRefused(bound.ChainBound())
	if e := s.chainLog.Warn(); e.Enabled() {
		e.Err(err).Stringer("remote", in.remote).Str("bound", bound.ChainBound()).
			Msg("refused a client certificate chain before verifying it (at most one line a second; monolock_tls_client_chains_refused_total counts every one)")
	}
}
