package tlsconn

import "time"

// turnClock tells the server's turns in a handshake from the client's, for
// io-timeout: it bounds a wait on the client, not on the server. The time
// during which the handshake's next step was the server's (waiting for a
// compute slot, then computing) does not count toward it: a fleet that
// reconnects at once queues for the slots, and a client that did its part
// must not be closed while it waits for the server's. It lives on the loop
// and reads no clock: every change of turn is marked with the time of the
// loop's turn that sees it (HandshakeTurn).
type turnClock struct {
	since  time.Duration // when the server's turn began; meaningful while server
	ended  time.Duration // the server's turns that have ended
	server bool          // it is the server's turn
}

// serverTurn marks that the client's bytes have come: the next step is the
// server's.
func (c *turnClock) serverTurn(now time.Duration) {
	if !c.server {
		c.server, c.since = true, now
	}
}

// clientTurn marks that the server waits for the client again.
func (c *turnClock) clientTurn(now time.Duration) {
	if c.server {
		c.ended += now - c.since
		c.server = false
	}
}
