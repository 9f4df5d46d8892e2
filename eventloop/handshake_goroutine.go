package eventloop

import "github.com/panjf2000/gnet/v2"

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
