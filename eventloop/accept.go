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

// acceptLoop accepts connections and enrolls them into the event loop, TLS
// ones too: their handshake starts in the loop (see handshake_loop.go), so a
// client that never sends its ClientHello costs a descriptor and a timer,
// like a silent plain one. An accept error never ends it: descriptor
// exhaustion (EMFILE, ENFILE) leaves the connection queued in the kernel's
// backlog, so the loop backs off and tries again, and serves the queue as
// descriptors free up.
//
// This goroutine is the only one that takes descriptors for connections
// (accept, and gnet's dup inside enroll), so the spare descriptor freed for
// a dup cannot be taken by an accept running meanwhile.
func (s *Server) acceptLoop() {
	defer s.accepting.Done()
	var (
		backoff time.Duration
		failed  int
	)
	for {
		conn, err := s.ln.Accept()
		if err == nil {
			var ctx any
			if s.cfg.TLS != nil {
				ctx = &tlsConn{scratch: &s.tlsLoop.scratch}
			}
			err = s.enroll(conn, ctx)
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
// connection accepted at the descriptor limit is never dropped. Only the
// accept loop uses it while it runs, and Shutdown after it has returned.
//
// The spare is a duplicate of one eventfd kept open for the server's life:
// closing a duplicate only drops a reference and making one only takes a
// reference, the cheapest pair of calls that free and retake a descriptor
// (creating and destroying an eventfd each time cost several times more).
type spareDescriptor struct {
	source int // the eventfd the spare duplicates; -1 when none could be made
	fd     int // -1 when none is held
}

// enroll hands an accepted socket to the event loop; ctx becomes the
// connection's context (nil for plain TCP, the *tlsConn for TLS).
func (s *Server) enroll(conn net.Conn, ctx any) error {
	s.spare.release()
	_, err := s.engine.EnrollContext(conn, ctx)
	s.spare.reserve()
	return err
}

func (d *spareDescriptor) open() {
	d.source, d.fd = -1, -1
	if fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC); err == nil {
		d.source = fd
	}
	d.reserve()
}

func (d *spareDescriptor) reserve() {
	if d.source < 0 || d.fd >= 0 {
		return
	}
	fd, err := unix.FcntlInt(uintptr(d.source), unix.F_DUPFD_CLOEXEC, 0)
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

// close releases the spare and its source for good.
func (d *spareDescriptor) close() {
	d.release()
	if d.source >= 0 {
		_ = unix.Close(d.source)
		d.source = -1
	}
}
