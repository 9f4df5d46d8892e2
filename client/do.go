package client

import (
	"context"
	"errors"
	"time"
)

// Do makes one attempt to run fn while holding the lock name. It waits in the
// lock's queue as long as ctx allows (cancelling ctx while waiting returns
// ctx.Err() at once), then calls fn with the fencing token, and releases the
// lock when fn returns or panics (a panic is re-raised after the release).
//
// fn's ctx is cancelled as soon as the client finds ownership no longer
// confirmed, on the goroutine that finds out and before anything else; the
// returned error then joins the cause (ErrHeartbeatTimeout,
// ErrConnectionClosed, ErrProtocolViolation or a *ServerError) to fn's own
// error, even when fn returned nil. LockFromContext(ctx).Valid() checks the
// deadline itself, without waiting for that goroutine: call it before each
// side effect. Cancelling Do's ctx while fn runs only asks fn to stop:
// heartbeats continue until it returns, and that graceful stop adds no error
// of its own.
func (c *Client) Do(ctx context.Context, name string, lease time.Duration, fn func(ctx context.Context, token uint64) error) error {
	_, err := c.do(ctx, name, lease, fn)
	return err
}

// do is Do that also reports whether fn was called, so DoRetry never calls it
// twice.
func (c *Client) do(ctx context.Context, name string, lease time.Duration, fn func(context.Context, uint64) error) (called bool, err error) {
	l, err := c.Acquire(ctx, name, lease)
	if err != nil {
		return false, err
	}
	return true, l.run(ctx, fn)
}

// run calls fn under the held lock and closes the lock afterwards.
func (l *Lock) run(ctx context.Context, fn func(context.Context, uint64) error) error {
	// A deferred Close, not recover: it releases the lock while a panic (or
	// runtime.Goexit) unwinds, and the panic continues with its stack intact.
	defer l.Close()
	work, cancel := context.WithCancelCause(context.WithValue(ctx, lockKey{}, l))
	defer cancel(nil)
	l.watchWork(cancel)
	err := fn(work, l.Token())
	return errors.Join(err, l.Close())
}

// lockKey is the context key under which Do's fn finds its Lock.
type lockKey struct{}

// LockFromContext returns the Lock held by the Do or DoRetry whose fn received
// ctx (or a context derived from it), or nil for any other context. Its Valid
// is the check to make before each side effect:
//
//	if !client.LockFromContext(ctx).Valid() {
//		return context.Cause(ctx)
//	}
//
// A nil *Lock's Valid returns false. Do closes the Lock itself; fn must not.
func LockFromContext(ctx context.Context) *Lock {
	l, _ := ctx.Value(lockKey{}).(*Lock)
	return l
}
