package eventloop

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

// The liveness probe makes a round trip through the loop's socket path: a
// socket pair enrolled at start like a client connection, whose loop end
// echoes what it reads. A probe writes a nonce to the other end and waits
// for it to come back, which happens only when the loop returns to epoll,
// dispatches a readable socket and flushes a write, as every client needs.
// The pair is made once, so a probe costs no descriptor: at the descriptor
// limit, when the server is still serving, the probe still answers.

// probe marks the echoing connection.
type probe struct{}

// prober is the server's end of the probe pair. One probe runs at a time;
// owed counts the echoed bytes not yet read, so that a probe abandoned
// half-way (its caller's deadline) leaves the next one in step.
type prober struct {
	turn  chan struct{} // a token: held by the probe in flight
	peer  net.Conn
	nonce uint64
	owed  int
	buf   []byte
}

func newProber(peer net.Conn) *prober {
	p := &prober{turn: make(chan struct{}, 1), peer: peer}
	p.turn <- struct{}{}
	return p
}

// openProbe enrolls the loop's end of a new socket pair.
func (s *Server) openProbe() error {
	inner, outer, err := socketPair()
	if err != nil {
		return fmt.Errorf("probe %w", err)
	}
	if _, err := s.engine.EnrollContext(inner, probe{}); err != nil {
		_ = outer.Close()
		return fmt.Errorf("enroll probe connection: %w", err)
	}
	s.prober = newProber(outer)
	return nil
}

// Probe returns nil once the loop has echoed a nonce through its socket
// path, or why not (ctx's error when the loop did not within ctx). It is the
// server's liveness probe: it answers only if the loop serves sockets.
func (s *Server) Probe(ctx context.Context) error {
	p := s.prober
	select {
	case <-p.turn:
	case <-ctx.Done():
		return fmt.Errorf("probe the event loop: %w", ctx.Err())
	}
	defer func() { p.turn <- struct{}{} }()
	if err := p.roundTrip(ctx); err != nil {
		return fmt.Errorf("probe the event loop: %w", err)
	}
	return nil
}

func (p *prober) roundTrip(ctx context.Context) error {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(DefaultIOTimeout)
	}
	// A cancelled ctx cuts the wait short. The cut must land before the
	// next probe sets its own deadline, so a cut already under way is
	// awaited.
	cut := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = p.peer.SetDeadline(time.Now())
		close(cut)
	})
	defer func() {
		if !stop() {
			<-cut
		}
	}()
	if err := p.peer.SetDeadline(deadline); err != nil {
		return err
	}
	p.nonce++
	var msg [8]byte
	binary.LittleEndian.PutUint64(msg[:], p.nonce)
	n, err := p.peer.Write(msg[:])
	p.owed += n // what was written comes back, a part of a nonce too
	if err != nil {
		return p.cause(ctx, err)
	}
	want := p.owed // earlier probes' leftovers, then ours
	if cap(p.buf) < want {
		p.buf = make([]byte, want)
	}
	for read := 0; read < want; {
		n, err := p.peer.Read(p.buf[read:want])
		read += n
		p.owed -= n
		if err != nil {
			return p.cause(ctx, err)
		}
	}
	if got := binary.LittleEndian.Uint64(p.buf[want-len(msg) : want]); got != p.nonce {
		return fmt.Errorf("the event loop echoed %x, not the nonce %x", got, p.nonce)
	}
	return nil
}

// cause prefers ctx's error to the deadline it set on the socket.
func (p *prober) cause(ctx context.Context, err error) error {
	if _, ok := ctx.Deadline(); ok && errors.Is(err, os.ErrDeadlineExceeded) {
		<-ctx.Done() // the socket's deadline is ctx's: it is due now
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err == io.EOF {
		return errNoLoop
	}
	return err
}
