package eventloop

import (
	"errors"
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// Accept back-off: the first retry is quick, the longest wait is short enough
// that a freed descriptor is noticed promptly.
const (
	minAcceptBackoff = 5 * time.Millisecond
	maxAcceptBackoff = time.Second
)

// acceptLoop accepts connections and enrolls them into the event loop. An
// accept error never ends it: descriptor exhaustion (EMFILE, ENFILE) leaves
// the connection queued in the kernel's backlog, so the loop backs off and
// tries again, and serves the queue as descriptors free up.
func (s *Server) acceptLoop() {
	defer s.accepting.Done()
	var (
		backoff time.Duration
		failed  int
	)
	spare := reserveDescriptor()
	defer func() { _ = unix.Close(spare) }()
	for {
		conn, err := s.ln.Accept()
		if err == nil && s.cfg.TLS != nil {
			s.bridges.Add(1)
			go s.acceptTLS(conn)
			continue
		}
		if err == nil {
			// gnet dups the accepted descriptor before it closes ours, so for a
			// moment the connection needs two. Hand it the spare one, so that a
			// connection accepted at the descriptor limit is never dropped.
			_ = unix.Close(spare)
			_, err = s.engine.EnrollContext(conn, nil)
			spare = reserveDescriptor()
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

// reserveDescriptor holds one descriptor for the next enrollment; -1 when
// none is free (the next accept then fails and backs off instead).
func reserveDescriptor() int {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC) // the cheapest descriptor to make
	if err != nil {
		return -1
	}
	return fd
}
