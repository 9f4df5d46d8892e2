package eventloop

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/rs/zerolog"

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
// backlog, so the loop first has the owner evict the connection that has
// waited longest for its ACQUIRE (see release.go) and accepts again at once;
// when none is old enough it waits until one is, and when none is waiting
// for its ACQUIRE at all it backs off and serves the queue as descriptors
// free up.
//
// This goroutine is the only one that takes descriptors for connections
// (accept, and gnet's dup inside enroll), so the spare descriptor freed for
// a dup cannot be taken by an accept running meanwhile.
func (s *Server) acceptLoop() {
	defer s.accepting.Done()
	var (
		backoff time.Duration
		failed  int
		evicted evictionLog
	)
	for {
		conn, err := s.ln.Accept()
		if err == nil {
			var ctx any
			if s.cfg.TLS != nil {
				ctx = s.tlsLoop.newConn()
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
		var wait time.Duration
		if outOfDescriptors(err) {
			var done bool
			if done, wait = s.evict(); done {
				// The loop has closed the socket before evict returned,
				// so the next accept finds its descriptor free.
				evicted.note(s.log)
				continue
			}
		}
		if failed == 0 {
			s.log.Error().Err(err).Msg("accepting a connection failed; retrying with back-off (raise the descriptor limit if this is EMFILE)")
		}
		failed++
		pause := wait
		if wait == 0 { // nothing will become evictable: wait for a descriptor to free
			backoff = min(max(2*backoff, minAcceptBackoff), maxAcceptBackoff)
			pause = backoff
		}
		select {
		case <-time.After(max(pause, minEvictWait)):
		case <-s.stopAccept:
			return
		}
	}
}

// outOfDescriptors reports whether err is the process's or the system's
// descriptor limit.
func outOfDescriptors(err error) bool {
	return errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE)
}

const (
	// evictCallTimeout bounds the accept loop's wait for the event loop to
	// evict; on a loop that slow, the accept backs off as for any error.
	evictCallTimeout = 100 * time.Millisecond
	// minEvictWait keeps the accept loop from spinning on a session about
	// to pass evictGrace.
	minEvictWait = time.Millisecond
)

// evict has the owner close the session that has waited longest for its
// ACQUIRE (see release.go). When none is old enough, wait is how long until
// one is: 0 when no session is waiting for its ACQUIRE, or when the loop did
// not answer in time.
func (s *Server) evict() (evicted bool, wait time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), evictCallTimeout)
	defer cancel()
	if s.call(ctx, func(o *owner) { evicted, wait = o.evictPending() }) != nil {
		return false, 0
	}
	return evicted, wait
}

// evictionLog reports evictions at most once per evictionLogEvery: under an
// attack they happen thousands of times a second.
type evictionLog struct {
	last  time.Time
	count int
}

const evictionLogEvery = 5 * time.Second

func (l *evictionLog) note(log zerolog.Logger) {
	l.count++
	if now := time.Now(); now.Sub(l.last) >= evictionLogEvery {
		log.Warn().Int("evicted", l.count).
			Msg("descriptor limit reached: closed connections that had not sent ACQUIRE to accept new ones; raise the descriptor limit (ulimit -n) unless this is an attack of idle connections")
		l.last, l.count = now, 0
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
