package eventloop

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
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
// like a silent plain one. An accept error never ends it. At the descriptor
// limit (EMFILE, ENFILE) it accepts through the door (see admission.go): it
// frees one of two descriptors it keeps, accepts the newcomer into it, and
// has the owner decide whether a session is closed in its place, it waits,
// or it is refused. Without a door descriptor left, it has the owner close
// a silent waiter or the connection without ACQUIRE silent longest (see
// release.go) and accepts again at once; when none is evictable yet it
// waits until one is, and when there is none at all it backs off and
// serves the queue as descriptors free up.
//
// This goroutine is the only one that takes descriptors for connections
// (accept, and gnet's dup inside enroll), so the spare descriptor freed for
// a dup cannot be taken by an accept running meanwhile.
func (s *Server) acceptLoop() {
	var (
		backoff time.Duration
		errs    acceptErrorLog
		evicted evictionLog
		d       = &s.door
	)
	d.armed = time.Time{} // with Config.HA, each term's listener is a new one
	defer d.leave()
	for {
		conn, err := d.accept(s.ln)
		if err == nil {
			errs.recovered(s.log)
			backoff = 0
			if d.waiting != nil && d.refill() { // a descriptor freed up: the one waiting first
				s.enrollAtLimit(d, d.take())
			}
			if d.waiting != nil || !d.refill() { // it took a door descriptor's place
				s.decide(d, conn, &evicted)
				continue
			}
			if err = s.enrollNew(conn); err == nil {
				continue
			}
		}
		if errors.Is(err, os.ErrDeadlineExceeded) && d.waiting != nil && !s.acceptStopped() {
			s.decideWaiting(d, &evicted)
			continue
		}
		if errors.Is(err, net.ErrClosed) || s.acceptStopped() {
			return
		}
		s.metrics.AcceptError()
		if outOfDescriptors(err) && d.waiting != nil && d.fifo {
			// One source alone: the backlog keeps its order behind the
			// one waiting (admission.go, rule 3).
			errs.failed(s.log, err, time.Now())
			select {
			case <-time.After(time.Until(d.retry)):
			case <-s.acceptStop:
				return
			}
			s.decideWaiting(d, &evicted)
			continue
		}
		if outOfDescriptors(err) && d.release() {
			errs.failed(s.log, err, time.Now())
			continue // the next accept takes the newcomer into the door's descriptor
		}
		var wait time.Duration
		if outOfDescriptors(err) {
			var done bool
			if done, wait = s.evict(); done {
				// The loop has closed the socket before evict returned,
				// so the next accept finds its descriptor free, unless
				// an HTTP listener (a probe) is waiting for one: it goes
				// first.
				evicted.note(s.log)
				s.yieldToProbes()
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
		case <-s.acceptStop:
			return
		}
	}
}

// enrollNew enrolls a connection just accepted.
func (s *Server) enrollNew(conn net.Conn) error {
	var ctx any
	if s.cfg.TLS != nil {
		ctx = s.tlsLoop.newConn()
	}
	return s.enroll(conn, ctx)
}

// yieldToProbes lets an HTTP listener waiting for a descriptor take the one
// an eviction has just freed.
func (s *Server) yieldToProbes() {
	if g := s.cfg.Descriptors; g != nil && g.Wanted() {
		g.Yield(yieldTimeout, s.acceptStop)
	}
}

// decide places conn, accepted at the descriptor limit in a door
// descriptor's place, by the owner's verdict (admission.go).
func (s *Server) decide(d *door, conn net.Conn, evicted *evictionLog) {
	from := sourceOf(conn.RemoteAddr())
	if d.waiting != nil && d.settled && !d.fifo && from == d.from {
		s.settleTie(d, conn, evicted) // rule 3's tie, without asking the owner
		return
	}
	v, wait, alone := s.admitCall(from, d.from, d.waiting != nil)
	switch {
	case v == admitted:
		evicted.note(s.log)
		s.yieldToProbes()
		s.enrollAtLimit(d, conn)
		return
	case alone && !s.crowded():
		// Its source is the only one: first come, first served. One
		// waiting already came first, so it goes in on the door's
		// descriptor, which comes back when a descriptor frees up.
		if d.waiting != nil {
			s.enrollAtLimit(d, d.take())
		}
		d.fifo = true
		d.wait(conn, from, wait)
		d.settled = v == waits || v == tied
		return
	}
	d.fifo = false
	switch v {
	case refused:
		s.refuse(d, conn, evicted)
	case tied:
		d.settled = true
		s.settleTie(d, conn, evicted)
	case waits:
		if d.waiting != nil {
			s.refuse(d, d.take(), evicted)
		}
		d.wait(conn, from, wait)
		d.settled = true
	default: // no verdict: refuse no one on a loop too slow to say
		if d.waiting != nil {
			s.enrollAtLimit(d, d.take()) // on the door's descriptor, as for one source alone
		}
		d.wait(conn, from, 0)
		d.settled = false
	}
}

// settleTie keeps at the door, of the one waiting and conn, from sources
// with as many sessions, the one that has sent something, else conn, and
// refuses the other. The one kept is decided again when the one waiting
// was to be.
func (s *Server) settleTie(d *door, conn net.Conn, evicted *evictionLog) {
	if sentSomething(d.waiting) && !sentSomething(conn) {
		s.refuse(d, conn, evicted)
		return
	}
	s.refuse(d, d.waiting, evicted)
	d.waiting = conn
}

// crowdBacklog is the length of the kernel's accept queue from which the
// door decides every newcomer at once even while one source is alone
// (admission.go, rule 3). Below it, one source's newcomers keep their
// order, and a newcomer from a source that has none yet waits behind at
// most that many turns of the eviction rules; above it, the backlog is a
// crowd, most likely one source's, that a first newcomer from another
// source must not wait behind.
const crowdBacklog = 256

// crowded reports whether the listener's accept queue holds crowdBacklog
// connections or more (for a listening socket, TCP_INFO's unacked is its
// accept queue's length). Unknown is not crowded.
func (s *Server) crowded() bool {
	sc, ok := s.ln.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	queued := 0
	if raw.Control(func(fd uintptr) {
		if info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
			queued = int(info.Unacked)
		}
	}) != nil {
		return false
	}
	return queued >= crowdBacklog
}

// sentSomething reports whether the client of conn, not yet enrolled, has
// sent anything: its input waits unread in the kernel.
func sentSomething(conn net.Conn) bool {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	n := 0
	if raw.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ) }) != nil {
		return false
	}
	return n > 0
}

// decideWaiting decides again the newcomer waiting at the door: it is
// enrolled once a descriptor has freed up or a session is closed in its
// place, and waits on otherwise.
func (s *Server) decideWaiting(d *door, evicted *evictionLog) {
	if d.refill() { // a descriptor freed up: it takes the place it holds
		s.enrollAtLimit(d, d.take())
		return
	}
	v, wait, alone := s.admitCall(d.from, sourceKey{}, false)
	if v != admitted {
		d.fifo = alone && !s.crowded()
		d.wait(d.waiting, d.from, wait)
		d.settled = v == waits
		return
	}
	evicted.note(s.log)
	s.yieldToProbes()
	s.enrollAtLimit(d, d.take())
}

// enrollAtLimit enrolls conn, which holds a door descriptor's place, and
// takes that place back from the descriptor the owner freed for it. A
// connection that fails to enroll is closed (gnet closes it), as at any
// other accept.
func (s *Server) enrollAtLimit(d *door, conn net.Conn) {
	if err := s.enrollNew(conn); err != nil {
		s.metrics.AcceptError()
		s.log.Error().Err(err).Msg("enrolling a connection at the descriptor limit failed; it was closed")
	}
	d.refill()
}

// refuse closes conn, a newcomer at the descriptor limit that is not let
// in, before it is a session.
func (s *Server) refuse(d *door, conn net.Conn, evicted *evictionLog) {
	_ = conn.Close()
	s.metrics.NewcomerRefused()
	evicted.note(s.log)
	d.refill()
}

// door is what the accept loop keeps to see newcomers at the descriptor
// limit (admission.go): two free descriptors, one of them given up for each
// accept at the limit, and the one newcomer that waits for room there,
// which holds the place of one of them. Only the accept loop uses it while
// it runs (New and Shutdown open and close its descriptors).
type door struct {
	ways    [2]spareDescriptor
	waiting net.Conn  // nil when none
	from    sourceKey // its source
	settled bool      // the owner found nothing to close for it (not a call that timed out)
	fifo    bool      // its source was alone: take no other newcomer until it is let in
	retry   time.Time // when it is decided again
	backoff time.Duration
	armed   time.Time // the listener's deadline now
}

func (d *door) open() {
	for i := range d.ways {
		d.ways[i].open()
	}
}

// leave closes the one waiting, if any: the accept loop is done.
func (d *door) leave() {
	if d.waiting != nil {
		_ = d.take().Close()
	}
}

// close frees the door's descriptors for good, once the accept loop has
// returned.
func (d *door) close() {
	for i := range d.ways {
		d.ways[i].close()
	}
}

// take returns the one waiting, which no longer does.
func (d *door) take() net.Conn {
	c := d.waiting
	d.waiting = nil
	return c
}

// refill takes back every door descriptor it can; true when all are held.
func (d *door) refill() bool {
	full := true
	for i := range d.ways {
		d.ways[i].reserve()
		if d.ways[i].fd < 0 {
			full = false
		}
	}
	return full
}

// release frees one door descriptor for the next accept; false when none
// is held (or none could ever be made).
func (d *door) release() bool {
	for i := range d.ways {
		if d.ways[i].fd >= 0 {
			d.ways[i].release()
			return true
		}
	}
	return false
}

// wait keeps conn, from source from, waiting at the door; it is decided
// again after wait, or after the back-off when nothing will become
// closable by itself.
//
// Beside other sources (not d.fifo) it is decided again at most once per
// evictGrace: a newcomer that rule 1 does not let in comes from a source
// with about the most, whose own silent sessions rule 2 would have it
// replace, over and over while its crowd lasts; each time costs a call
// into the loop, while newcomers from other sources wait behind.
func (d *door) wait(conn net.Conn, from sourceKey, wait time.Duration) {
	if d.waiting != conn {
		d.backoff = 0
	}
	d.waiting, d.from = conn, from
	pause := min(wait, maxAcceptBackoff)
	if wait == 0 {
		d.backoff = min(max(2*d.backoff, minAcceptBackoff), maxAcceptBackoff)
		pause = d.backoff
	}
	if !d.fifo {
		pause = max(pause, evictGrace)
	}
	d.retry = time.Now().Add(max(pause, minEvictWait))
}

// accept accepts the next connection; while one waits at the door, only
// until it is to be decided again (then the error is
// os.ErrDeadlineExceeded).
func (d *door) accept(ln net.Listener) (net.Conn, error) {
	var until time.Time
	if d.waiting != nil {
		until = d.retry
	}
	if !until.Equal(d.armed) {
		if dl, ok := ln.(interface{ SetDeadline(time.Time) error }); ok && dl.SetDeadline(until) == nil {
			d.armed = until
		}
	}
	return ln.Accept()
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
		Msg("accepting a connection failed; retrying (at the descriptor limit, through a descriptor kept free for it; raise the descriptor limit if this is EMFILE)")
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
			Msg("descriptor limit reached: closed connections that had not sent ACQUIRE, or sessions of the source with the most that are not holders, to accept new ones; raise the descriptor limit (ulimit -n) unless this is an attack of idle connections")
		l.last, l.count = now, 0
	}
}

// acceptStopped reports whether the accept loop is to stop: the server
// shuts down, or with Config.HA the term's listener closes.
func (s *Server) acceptStopped() bool {
	select {
	case <-s.acceptStop:
		return true
	default:
		return false
	}
}

func (s *Server) stopping() bool {
	select {
	case <-s.acceptStop:
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
//
// The spare may be missing: an HTTP listener's accept, in its own
// goroutine, can take the descriptor a close freed before the spare took
// it back. Then a door descriptor becomes the spare, rather than the dup
// failing, which would close the connection just accepted.
func (s *Server) enroll(conn net.Conn, ctx any) error {
	if s.spare.reserve(); s.spare.fd < 0 && s.door.release() {
		s.spare.reserve()
	}
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
