package tlsconn

import "sync"

// inputBudget bounds what a client may send while its handshake runs, by
// where the handshake is: a ClientHello's worth (MaxHelloBuffered) while
// the server waits for one, its last flight's (MaxClientFlight) once the
// server has answered it. A client cannot send its last flight before the
// server's answer (it needs the server's key share), so no honest byte is
// counted against the wrong bound. The loop spends; the handshake goroutine
// tells it what the server sent.
type inputBudget struct {
	mu        sync.Mutex
	helloFed  int // sent while the server waits for a ClientHello
	flightFed int // sent since the server answered one
	// answered says the server has answered the ClientHello and not with a
	// HelloRetryRequest: what comes now is the client's last flight.
	answered bool

	server ServerMessages // what the server sent; only the goroutine touches it
}

// spend counts n more bytes from the client; false when they exceed the
// bound of this point of the handshake.
func (b *inputBudget) spend(n int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.answered {
		b.flightFed += n
	} else {
		b.helloFed += n
	}
	return b.helloFed <= MaxHelloBuffered && b.flightFed <= MaxClientFlight
}

// serverSent reads what the handshake sends, on the handshake goroutine:
// an answer to the ClientHello moves the bound to the last flight's, unless
// it is a HelloRetryRequest, which asks for a second ClientHello, bounded
// as the first was.
func (b *inputBudget) serverSent(p []byte) {
	answered, retry := b.server.Write(p)
	if !answered {
		return
	}
	b.mu.Lock()
	if retry {
		b.helloFed = 0
	}
	b.answered = !retry
	b.mu.Unlock()
}
