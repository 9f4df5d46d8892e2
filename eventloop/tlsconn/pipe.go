package tlsconn

import "sync"

// pipe carries the client's bytes from the loop, which reads them from the
// socket, to the handshake goroutine, which hands them to crypto/tls. It
// bounds nothing itself: the loop asks inputBudget before it feeds.
type pipe struct {
	mu      sync.Mutex
	buf     []byte        // arrived and not yet taken
	closed  bool          // the connection closed, or the handshake was cut short
	waiting bool          // the reader found nothing and waits for more
	ready   chan struct{} // a token when buf grew or closed was set
}

// feed appends what the loop received.
func (p *pipe) feed(b []byte) {
	p.mu.Lock()
	p.buf = append(p.buf, b...)
	p.signal()
	p.mu.Unlock()
}

// take copies what has arrived into b, without waiting; closed reports that
// nothing more will come. Finding nothing, the reader is waiting from now on
// (idle), until it takes something.
func (p *pipe) take(b []byte) (n int, closed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, true
	}
	n = copy(b, p.buf)
	p.buf = p.buf[n:]
	p.waiting = n == 0
	return n, false
}

// wait blocks until something was fed or the pipe closed.
func (p *pipe) wait() { <-p.ready }

// idle reports whether the reader waits for bytes that have not come.
func (p *pipe) idle() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waiting && len(p.buf) == 0
}

// close makes the reader's next take report closed: the connection is gone.
func (p *pipe) close() {
	p.mu.Lock()
	p.closed = true
	p.signal()
	p.mu.Unlock()
}

// rest is what the reader never took: once the handshake has finished, the
// records the client sent with or after its last flight.
func (p *pipe) rest() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.buf
}

func (p *pipe) signal() {
	select {
	case p.ready <- struct{}{}:
	default:
	}
}
