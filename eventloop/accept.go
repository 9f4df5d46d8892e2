package eventloop

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Accept back-off: the first retry is quick, the longest wait is short enough
// that a freed descriptor is noticed promptly.
const (
	minAcceptBackoff = 5 * time.Millisecond
	maxAcceptBackoff = time.Second
)

// acceptLoop accepts connections and enrolls them into the event loop; with
// TLS it hands each to a handshake goroutine first, at most
// Config.MaxTLSHandshakes at a time (the rest wait in the kernel's backlog).
// An accept error never ends it: descriptor exhaustion (EMFILE, ENFILE)
// leaves the connection queued in the kernel's backlog, so the loop backs off
// and tries again, and serves the queue as descriptors free up.
func (s *Server) acceptLoop() {
	defer s.accepting.Done()
	var (
		backoff time.Duration
		failed  int
	)
	for {
		if s.cfg.TLS != nil && !s.handshakes.take(s.stopAccept) {
			return
		}
		conn, err := s.ln.Accept()
		if err == nil && s.cfg.TLS != nil {
			wall, mono := s.handler.owner.clock()
			go s.handshake(conn, mono, wall)
		} else if err == nil {
			err = s.enroll(conn, nil)
		} else if s.cfg.TLS != nil {
			s.handshakes.done()
		}
		if err == nil {
			if failed > 0 {
				s.log.Info().Int("errors", failed).Msg("accepting connections again")
				failed, backoff = 0, 0
			}
			continue
		}
		if errors.Is(err, net.ErrClosed) || s.stopping() {
			return
		}
		s.metrics.AcceptError()
		if failed == 0 {
			s.log.Error().Err(err).Msg("accepting a connection failed; retrying with back-off (raise the descriptor limit if this is EMFILE)")
		}
		failed++
		backoff = min(max(2*backoff, minAcceptBackoff), maxAcceptBackoff)
		select {
		case <-time.After(backoff):
		case <-s.stopAccept:
			return
		}
	}
}

func (s *Server) stopping() bool {
	select {
	case <-s.stopAccept:
		return true
	default:
		return false
	}
}

// spareDescriptor holds one descriptor for the next enrollment. gnet dups
// the accepted descriptor before it closes ours, so for a moment a
// connection needs two; the spare is closed just before, so that a
// connection accepted at the descriptor limit is never dropped. The accept
// loop and the TLS handshakes share it.
type spareDescriptor struct {
	mu sync.Mutex
	fd int // -1 when none could be reserved
}

// enroll hands an accepted socket to the event loop; ctx becomes the
// connection's context (nil for plain TCP, the *tlsConn for TLS).
func (s *Server) enroll(conn net.Conn, ctx any) error {
	s.spare.mu.Lock()
	defer s.spare.mu.Unlock()
	s.spare.release()
	_, err := s.engine.EnrollContext(conn, ctx)
	s.spare.reserve()
	return err
}

func (d *spareDescriptor) reserve() {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC) // the cheapest descriptor to make
	if err != nil {
		fd = -1
	}
	d.fd = fd
}

func (d *spareDescriptor) release() {
	if d.fd >= 0 {
		_ = unix.Close(d.fd)
		d.fd = -1
	}
}

// handshakeSlots bounds the TLS handshakes in flight, so that a flood of
// connects that never finish their handshake costs bounded memory, and lets
// Shutdown cut the ones in flight short.
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

// take waits for a free slot; false when stop closed first.
func (h *handshakeSlots) take(stop <-chan struct{}) bool {
	select {
	case h.slots <- struct{}{}:
		h.wg.Add(1)
		return true
	case <-stop:
		return false
	}
}

// done frees a slot.
func (h *handshakeSlots) done() {
	<-h.slots
	h.wg.Done()
}

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
