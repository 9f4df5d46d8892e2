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
	token atomic.Uint64

	// ctx ends with the session; its cause says why (see Err).
	ctx    context.Context
	cancel context.CancelCauseFunc

	answered  chan struct{} // closed at the server's first reply: held or queued
	granted   chan struct{} // closed when the server grants the lock
	closing   chan struct{} // closed by the first Close
	closeOnce sync.Once
	done      chan struct{} // closed when the connection is closed and both goroutines have ended
	err       error         // why the session ended, when not by Close; written before done closes
}

// startLock starts the session goroutine and the reader on conn. The session
// sends ACQUIRE first.
func startLock(conn net.Conn, name string, lease time.Duration, leaseMS uint32, observe func(ackEvent)) *Lock {
	l := &Lock{
		name:     name,
		answered: make(chan struct{}),
		granted:  make(chan struct{}),
		closing:  make(chan struct{}),
		done:     make(chan struct{}),
	}
	l.ctx, l.cancel = context.WithCancelCause(context.Background())

	frames := make(chan inbound)
	stop := make(chan struct{})
	readerDone := make(chan struct{})
	go readFrames(conn, frames, stop, readerDone)

	s := newSession(l, conn, frames, name, lease, leaseMS, observe)
	go func() {
		l.end(s.run())
		// Closing the connection is the release; it also ends the reader's Read.
		_ = conn.Close()
		close(stop)
		<-readerDone
		close(l.done)
	}()
	return l
}

// end records why the session ended and cancels the lock's context at once, so
// guarded work stops before anything else happens.
func (l *Lock) end(err error) {
	if err == nil {
		l.cancel(ErrReleased)
		return
	}
	l.err = err
	l.cancel(err)
}

// Name returns the lock's name.
func (l *Lock) Name() string { return l.name }

// Token returns the fencing token of the grant, or 0 before the lock is granted.
// Pass it to the guarded resource, which should reject writes carrying a token
// lower than the highest it has seen.
func (l *Lock) Token() uint64 { return l.token.Load() }

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
// ErrHeartbeatTimeout, ErrConnectionClosed or ErrProtocolViolation, a
// *ServerError, or ErrReleased after Close.
func (l *Lock) Err() error {
	if l.ctx.Err() == nil {
		return nil
	}
	return context.Cause(l.ctx)
}

// Close releases the lock (or leaves the queue) by closing the connection, and
// returns once the connection is closed. It returns the loss cause when the
// lock had been lost before Close, nil otherwise. It is safe to call more than
// once and from several goroutines.
func (l *Lock) Close() error {
	l.closeOnce.Do(func() { close(l.closing) })
	<-l.done
	return l.err
}
