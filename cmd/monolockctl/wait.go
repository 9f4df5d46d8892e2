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
// within -wait, or as long as it takes. The client counts -wait from the
// start of the attempt: queued and not granted by then is busy; no answer
// from the server by then (or no connection) is unavailable, not busy.
func (r *runArgs) acquire(ctx context.Context, c *client.Client) (*client.Lock, error) {
	switch {
	case r.noWait:
		return c.TryAcquire(ctx, r.name, r.lease)
	case r.wait == 0:
		return c.Acquire(ctx, r.name, r.lease)
	}
	l, err := c.AcquireWithin(ctx, r.name, r.lease, r.wait)
	switch {
	case err == nil:
		return l, nil
	case errors.Is(err, client.ErrBusy):
		return nil, fmt.Errorf("%w: not granted within -wait %v", client.ErrBusy, r.wait)
	}
	return nil, err
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
