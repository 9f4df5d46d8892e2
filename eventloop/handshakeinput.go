package eventloop

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/monolock/monolock/eventloop/tlsconn"
)

// handshakeInput carries the client's ciphertext from the loop to the
// handshake goroutine, and the handshake's result back.
type handshakeInput struct {
	mu       sync.Mutex
	buf      []byte // arrived and not yet read by the handshake
	helloFed int    // fed while the server waits for a ClientHello, bounded by tlsconn.MaxHelloBuffered
	// awaitingHello says the server waits for a ClientHello: at first, and
	// again after it asks for a second one (a HelloRetryRequest) until its
	// ServerHello. What the client sends while it is false is its last
	// flight, bounded by tlsconn.MaxClientFlight.
	awaitingHello bool
	flightFed     int
	closed        bool // the connection closed, or the handshake was cut short
	done          bool // the goroutine has finished; err is its result
	err           error
	identity      string        // the client's, from its certificate, when err is nil
	ready         chan struct{} // a token when buf grew or closed was set

	server tlsconn.ServerMessages // what the handshake sent; only the goroutine touches it

	slots   *handshakeSlots
	holding bool     // the goroutine holds a compute slot; only it touches this
	remote  net.Addr // the client's, read on the loop, for the goroutine's log

	// io-timeout bounds a wait on the client, not on the server: the time
	// during which the handshake's next step was the server's (waiting for
	// a compute slot, then computing) does not count toward it. A fleet
	// that reconnects at once queues for the slots, and a client that did
	// its part must not be closed while it waits for the server's.
	// Only the handshake goroutine reads the clock for them; the loop's
	// turns keep their one reading of it.
	serverSince time.Time     // the server's turn began; zero on the client's
	serverTime  time.Duration // the server's turns that have ended
}

func newHandshakeInput(slots *handshakeSlots, remote net.Addr) *handshakeInput {
	return &handshakeInput{ready: make(chan struct{}, 1), slots: slots, remote: remote, awaitingHello: true}
}

// serverTurn begins a turn of the server's: the goroutine has input to work
// on (the ClientHello at its start, then each flight of the client's).
func (in *handshakeInput) serverTurn() {
	in.mu.Lock()
	if in.serverSince.IsZero() && !in.done {
		in.serverSince = time.Now()
	}
	in.mu.Unlock()
}

// excused says how much of the handshake so far was the server's turn, and
// whether it is the server's turn now. The loop's io-timeout leaves that
// time out (timers.go).
func (in *handshakeInput) excused() (ended time.Duration, serverTurn bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.serverTime, !in.serverSince.IsZero()
}

// feed appends what the loop received; false when that exceeds the bound
// of what the client may send at this point of the handshake: a ClientHello
// while the server waits for one, its last flight once the server has
// answered. A client cannot send its last flight before the server's answer
// (it needs the server's key share), so no honest byte is counted against
// the wrong bound.
func (in *handshakeInput) feed(p []byte) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.awaitingHello {
		in.helloFed += len(p)
	} else {
		in.flightFed += len(p)
	}
	if in.helloFed > tlsconn.MaxHelloBuffered || in.flightFed > tlsconn.MaxClientFlight {
		return false
	}
	in.buf = append(in.buf, p...)
	in.signal()
	return true
}

// serverWrote notes what the handshake sent, on the handshake goroutine,
// read as records and handshake messages whatever pieces crypto/tls writes
// them in: an answer to the ClientHello ends the wait for one, unless it is
// a HelloRetryRequest, which asks for a second one.
func (in *handshakeInput) serverWrote(p []byte) {
	answered, retry := in.server.Write(p)
	if !answered {
		return
	}
	in.mu.Lock()
	if retry {
		in.helloFed = 0 // the second ClientHello has the bound the first had
	}
	in.awaitingHello = retry
	in.mu.Unlock()
}

// clientTurn ends the server's turn; in.mu is held.
func (in *handshakeInput) clientTurn() {
	if !in.serverSince.IsZero() {
		in.serverTime += time.Since(in.serverSince)
		in.serverSince = time.Time{}
	}
}

// close makes the goroutine's reads fail: the connection is gone.
func (in *handshakeInput) close() {
	in.mu.Lock()
	in.closed = true
	in.signal()
	in.mu.Unlock()
}

func (in *handshakeInput) signal() {
	select {
	case in.ready <- struct{}{}:
	default:
	}
}

// Read runs on the handshake goroutine. It gives up its compute slot while
// it waits for input, and takes one before it works on any.
func (in *handshakeInput) Read(p []byte) (int, error) {
	for {
		in.mu.Lock()
		n := copy(p, in.buf)
		in.buf = in.buf[n:]
		closed := in.closed
		if n == 0 && !closed {
			in.clientTurn() // it waits for the client now
		}
		in.mu.Unlock()
		switch {
		case closed:
			in.release()
			return 0, net.ErrClosed
		case n > 0:
			in.serverTurn() // the client's flight is here: waiting for a slot is the server's
			if !in.holding {
				in.slots.take() // a wait for the CPU, never for a client
				in.holding = true
			}
			return n, nil
		}
		in.release()
		<-in.ready
	}
}

func (in *handshakeInput) release() {
	if in.holding {
		in.slots.give()
		in.holding = false
	}
}

// finish records the handshake's result; the goroutine then wakes the loop.
func (in *handshakeInput) finish(identity string, err error) {
	in.release()
	in.mu.Lock()
	in.clientTurn() // the ACQUIRE is the client's to send
	in.done, in.identity, in.err = true, identity, err
	in.mu.Unlock()
}

// result is the handshake's result once the goroutine has finished: what
// the client sent beyond the handshake (records the session reads first),
// and the client's identity.
func (in *handshakeInput) result() (rest []byte, identity string, done bool, err error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.buf, in.identity, in.done, in.err
}

// handshakeSlots bounds the TLS handshakes computing at once, and lets
// Shutdown wait for the goroutines in flight and cut them short.
type handshakeSlots struct {
	slots  chan struct{}
	ctx    context.Context // ended by Shutdown
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newHandshakeSlots(n int) *handshakeSlots {
	ctx, cancel := context.WithCancel(context.Background())
	return &handshakeSlots{slots: make(chan struct{}, n), ctx: ctx, cancel: cancel}
}

// take waits for a compute slot. A handshake holds one only while it has
// input to work on, so the wait is for the CPU, never for a slow client.
func (h *handshakeSlots) take() { h.slots <- struct{}{} }

func (h *handshakeSlots) give() { <-h.slots }

// stop lets the handshakes in flight finish for up to grace (they join the
// loop and are then closed with ERROR 0x01 like every session), ends the rest
// and waits for their goroutines.
func (h *handshakeSlots) stop(grace time.Duration) {
	done := make(chan struct{})
	go func() {
		h.wg.Wait()
		close(done)
	}()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-t.C:
	}
	h.cancel()
	<-done
}
