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
// backlog, so the loop first has the owner evict a silent waiter or the
// connection without ACQUIRE silent longest (see release.go) and
// accepts again at once; when none is evictable yet it waits until one is,
// and when there is none at all it backs off and serves the queue as
// descriptors free up.
//
// This goroutine is the only one that takes descriptors for connections
// (accept, and gnet's dup inside enroll), so the spare descriptor freed for
// a dup cannot be taken by an accept running meanwhile.
func (s *Server) acceptLoop() {
	defer s.accepting.Done()
	var (
		backoff time.Duration
		errs    acceptErrorLog
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
			errs.recovered(s.log)
			backoff = 0
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
				// so the next accept finds its descriptor free, unless
				// an HTTP listener (a probe) is waiting for one: it goes
				// first.
				evicted.note(s.log)
				if g := s.cfg.Descriptors; g != nil && g.Wanted() {
					g.Yield(yieldTimeout, s.stopAccept)
				}
				continue
			}
		}
		errs.failed(s.log, err, time.Now())
		// A session about to become evictable is waited for, but never
		// longer than the back-off's ceiling: a descriptor may free up
		// before then.
		pause := min(wait, maxAcceptBackoff)
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

// acceptErrorLog reports failed accepts at most once per acceptErrorLogEvery,
// with how many failed since the last report, and that accepting works
// again only after a run of failures it reported: at the descriptor limit a
// run can start and end dozens of times a second.
// monolock_accept_errors_total counts every failure.
type acceptErrorLog struct {
	last     time.Time // when a failure was last reported
	errors   int       // failures since then
	reported bool      // the current run of failures has been reported
	run      int       // failures in the current run
}

const acceptErrorLogEvery = 5 * time.Second

func (l *acceptErrorLog) failed(log zerolog.Logger, err error, now time.Time) {
	l.errors++
	l.run++
	if !l.last.IsZero() && now.Sub(l.last) < acceptErrorLogEvery {
		return
	}
	log.Error().Err(err).Int("errors", l.errors).
		Msg("accepting a connection failed; retrying with back-off (raise the descriptor limit if this is EMFILE)")
	l.last, l.errors, l.reported = now, 0, true
}

func (l *acceptErrorLog) recovered(log zerolog.Logger) {
	if l.reported {
		log.Info().Int("errors", l.run).Msg("accepting connections again")
	}
	l.reported, l.run = false, 0
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
	// yieldTimeout bounds the wait for an HTTP listener to take the
	// descriptor freed for it.
	yieldTimeout = 20 * time.Millisecond
)

// evict has the owner close a silent waiter or the session that has waited
// longest for its ACQUIRE (see release.go). When none may be closed yet,
// wait is how long until one may: 0 when there is none, or when the loop
// did not answer in time.
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
