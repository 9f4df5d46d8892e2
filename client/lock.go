package client

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Lock is one connection's claim on one named lock, returned by Enqueue, Acquire
// and TryAcquire. Its goroutines keep heartbeating until Close or until the lock
// is lost; Close must be called in every case, it is what releases the lock.
type Lock struct {
	name  string
	lease time.Duration
	token atomic.Uint64

	// ctx ends with the session; its cause says why (see Err).
	ctx    context.Context
	cancel context.CancelCauseFunc

	// start is the monotonic origin of the deadlines below, which are stored
	// as offsets from it so that Valid reads them without a lock.
	start time.Time
	// validUntil is the give-up deadline (send of the newest answered request
	// + 0.8 × lease) while the lock is held, and 0 before the grant and after
	// the session ends, so Valid is false then.
	validUntil atomic.Int64
	// confirmedUntil is the last give-up deadline while held; it survives the
	// end of the session, for ValidUntil.
	confirmedUntil atomic.Int64
	// maxRTT is the longest round trip measured, in nanoseconds.
	maxRTT atomic.Int64
	// expired is set by the first Valid that sees the deadline pass; the
	// session then treats the lock as lost even if a late answer arrives, so
	// Valid never turns true again.
	expired atomic.Bool

	// stopWork cancels Do's work context; end calls it before anything else.
	mu       sync.Mutex
	stopWork context.CancelCauseFunc
	ended    error // the cause, once the session has ended

	answered  chan struct{} // closed at the server's first reply: held or queued
	granted   chan struct{} // closed when the server grants the lock
	closing   chan struct{} // closed by the first Close
	closeOnce sync.Once
	done      chan struct{} // closed when the connection is closed and both goroutines have ended
	err       error         // why the session ended, when not by Close; written before done closes
}

// startLock connects on the caller's goroutine: it dials with dial (the
// rules bound it by the connect deadline and the wait's; ctx may end it
// sooner) and sends ACQUIRE. The caller's goroutine has the stack a dial
// needs already, which a new goroutine would grow for each attempt. Once the
// connection is up, the session goroutine takes over and starts the reader.
// The Lock is returned when the connect is over, so nothing can Close it
// before; a failed connect leaves it ended (done closed, err set).
func startLock(ctx context.Context, a attempt, dial func(context.Context) (net.Conn, error), observe func(ackEvent)) *Lock {
	l := &Lock{
		name:     a.name,
		lease:    a.lease,
		start:    time.Now(),
		answered: make(chan struct{}),
		granted:  make(chan struct{}),
		closing:  make(chan struct{}),
		done:     make(chan struct{}),
	}
	l.ctx, l.cancel = context.WithCancelCause(context.Background())
	s := &session{lock: l, observe: observe, m: newMachine(a)}
	s.timer = time.NewTimer(time.Hour)
	s.timer.Stop()
	if s.connect(ctx, dial) {
		s.timer.Stop()
		if s.conn != nil {
			_ = closeConn(s.conn, s.abort)
		}
		close(l.done)
		return l
	}
	go func() {
		defer close(l.done)
		defer s.timer.Stop()
		frames := make(chan inbound)
		stop := make(chan struct{})
		readerDone := make(chan struct{})
		go readFrames(s.conn, frames, stop, readerDone)
		s.frames = frames
		s.run()
		// The rules are done: the server has closed first (after RELEASE,
		// an ERROR or on its own) or the session is abandoned. Closing also
		// ends the reader's Read.
		_ = closeConn(s.conn, s.abort)
		close(stop)
		<-readerDone
	}()
	return l
}

// end records why the session ended and stops the work at once, on the
// goroutine that found out, before anything else happens: Valid turns false,
// Do's work context is cancelled, then the lock's own context.
func (l *Lock) end(err error) {
	cause := err
	if cause == nil {
		cause = ErrReleased
	}
	l.validUntil.Store(0)
	l.mu.Lock()
	l.ended = cause
	stop := l.stopWork
	l.mu.Unlock()
	if stop != nil {
		stop(cause)
	}
	l.err = err
	l.cancel(cause)
}

// watchWork makes end cancel the work context with the loss cause
// synchronously; if the session has already ended it cancels at once.
func (l *Lock) watchWork(cancel context.CancelCauseFunc) {
	l.mu.Lock()
	ended := l.ended
	if ended == nil {
		l.stopWork = cancel
	}
	l.mu.Unlock()
	if ended != nil {
		cancel(ended)
	}
}

// setValidUntil publishes a new give-up deadline while the lock is held.
func (l *Lock) setValidUntil(deadline time.Time) {
	d := int64(deadline.Sub(l.start))
	l.confirmedUntil.Store(d)
	l.validUntil.Store(d)
}

// Name returns the lock's name.
func (l *Lock) Name() string { return l.name }

// Token returns the fencing token of the grant, or 0 before the lock is granted.
// Pass it to the guarded resource, which should reject writes carrying a token
// lower than the highest it has seen.
func (l *Lock) Token() uint64 { return l.token.Load() }

// Valid reports whether the lock is held and its ownership still confirmed:
// granted, not lost, not closed, and less than 0.8 × lease has passed (by the
// monotonic clock) since the send of the newest request the server answered.
// It reads the clock itself instead of waiting for the goroutine that watches
// the deadline, so work that resumes after a pause (a stopped process, a long
// garbage-collection stall) sees the loss at its first check. It is cheap (one
// clock read and one atomic load) and safe from any goroutine: call it right
// before each side effect. Once it has returned false it never returns true
// again, and the lock counts as lost.
//
// Valid narrows the window in which stale work can act; it cannot close it (the
// process may pause right after the check). Fencing tokens are what protects
// the resource.
func (l *Lock) Valid() bool {
	if l == nil {
		return false
	}
	until := l.validUntil.Load()
	if until == 0 {
		return false
	}
	if int64(time.Since(l.start)) < until {
		return true
	}
	l.expired.Store(true)
	return false
}

// ValidUntil returns the give-up deadline of a held lock: the send of the
// newest request the server answered, plus 0.8 × lease (the zero time before
// the grant). After a loss it keeps its last value. The server's expiry cannot
// hand the lock on before ValidUntil + 0.2 × lease, since the server counts
// the whole lease from its receipt of that request; that is the latest moment
// work that must not overlap the next holder's may run.
func (l *Lock) ValidUntil() time.Time {
	d := l.confirmedUntil.Load()
	if d == 0 {
		return time.Time{}
	}
	return l.start.Add(time.Duration(d))
}

// MaxRTT returns the longest round trip measured on the lock's connection so
// far (ACQUIRE or a heartbeat to its answer). A lock can be held only while
// the round trip stays below 0.4 × lease; MaxRTT lets a caller warn before a
// slow link costs it the lock.
func (l *Lock) MaxRTT() time.Duration { return time.Duration(l.maxRTT.Load()) }

// Granted is closed when the server grants the lock (at once, or by promotion
// while queued).
func (l *Lock) Granted() <-chan struct{} { return l.granted }

// Lost is closed when the session ends: ownership (or the place in the queue)
// is no longer confirmed, or Close was called. Err says which.
func (l *Lock) Lost() <-chan struct{} { return l.ctx.Done() }

// Context returns a context that is cancelled when Lost is closed; its
// context.Cause is Err. Derive the guarded work's context from it.
func (l *Lock) Context() context.Context { return l.ctx }

// Err returns nil while the session lives, then why it ended: an error wrapping
// ErrHeartbeatTimeout, ErrConnectionClosed, ErrProtocolViolation or
// ErrTLSRefused, a *ServerError, or ErrReleased after Close.
func (l *Lock) Err() error {
	if l.ctx.Err() == nil {
		return nil
	}
	return context.Cause(l.ctx)
}

// Close releases the lock (or leaves the queue) and returns once the
// connection is closed. It returns the loss cause when the lock had been lost
// before Close, nil otherwise. It is safe to call more than once and from
// several goroutines.
//
// The release is a RELEASE frame, after which the server frees the lock as
// soon as it reads it and closes the connection first; Close waits for that
// close, at most min(lease, 2 s), so that the TIME_WAIT entry of the
// connection stays on the server and the client host keeps no ephemeral port
// for it. If the server has not closed by then, or the write or a read
// fails, Close resets the connection (an RST, no TIME_WAIT either); should
// the RST be lost, the server frees the lock when the lease runs out. A
// server from before RELEASE answers it with ERROR 0x13 and closes: that is
// a release too, and not an error.
//
// After a loss by silence or by a protocol violation while the lock was held,
// the connection stays open until Close (the work has stopped) or until the
// send of the last request plus the lease, whichever comes first; see the
// package documentation for why.
func (l *Lock) Close() error {
	l.closeOnce.Do(func() { close(l.closing) })
	<-l.done
	return l.err
}
