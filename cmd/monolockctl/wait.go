package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/monolock/monolock/client"
	"github.com/monolock/monolock/protocol"
)

// waitForLock acquires the lock as the flags say, giving up on a signal.
func (r *runArgs) waitForLock(c *client.Client, sigs <-chan os.Signal, e *env) (*client.Lock, int, bool) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		lock *client.Lock
		err  error
	}
	done := make(chan result, 1)
	go func() {
		l, err := r.acquire(ctx, c)
		done <- result{l, err}
	}()
	select {
	case got := <-done:
		if got.err != nil {
			status := acquireStatus(got.err)
			hint := ""
			if status == exitUnavailable && isDialError(got.err) {
				hint = "; " + r.conn.unreachableHint()
			}
			r.report(e, "%v%s", got.err, hint)
			return nil, status, false
		}
		return got.lock, 0, true
	case sig := <-sigs:
		cancel()
		if got := <-done; got.lock != nil {
			_ = got.lock.Close()
		}
		r.report(e, "%v while waiting for the lock", sig)
		return nil, exitSignalBase + signalNumber(sig), false
	}
}

// acquire gets the lock as the flags say: at once or not at all (-no-wait),
// within -wait, or as long as it takes.
func (r *runArgs) acquire(ctx context.Context, c *client.Client) (*client.Lock, error) {
	switch {
	case r.noWait:
		return c.TryAcquire(ctx, r.name, r.lease)
	case r.wait == 0:
		return c.Acquire(ctx, r.name, r.lease)
	}
	// -wait bounds the time in the queue. Reaching the server at all within
	// it is a separate matter: failing that is "unavailable", not "busy".
	waitCtx, cancel := context.WithTimeout(ctx, r.wait)
	defer cancel()
	l, err := c.Enqueue(waitCtx, r.name, r.lease)
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("no answer from the server within -wait %v", r.wait)
		}
		return nil, err
	}
	select {
	case <-l.Granted():
		return l, nil
	case <-l.Lost():
		return nil, l.Close()
	case <-waitCtx.Done():
		_ = l.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: not granted within -wait %v", client.ErrBusy, r.wait)
	}
}

// isDialError reports whether err is a failure to connect at all.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// acquireStatus maps a failure to get the lock to the exit status.
func acquireStatus(err error) int {
	var serverErr *client.ServerError
	var protoErr *protocol.Error
	var verifyErr *tls.CertificateVerificationError
	switch {
	case errors.Is(err, client.ErrBusy):
		return exitBusy
	case errors.As(err, &verifyErr):
		return exitUsage // the server's certificate does not verify: -tls-ca or -addr is wrong
	case errors.As(err, &serverErr):
		if serverErr.Retryable() {
			return exitUnavailable
		}
		return exitUsage
	case errors.As(err, &protoErr):
		return exitUsage // an invalid name or lease, found before dialing
	}
	return exitUnavailable
}
