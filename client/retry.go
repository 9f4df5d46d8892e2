package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/monolock/monolock/protocol"
)

// DoRetry is Do with retries of transient failures before fn starts: failed
// dials, connections lost while waiting, and retryable server errors (codes
// below 0x10). It waits between attempts with exponential backoff and jitter,
// from 100ms doubling up to 5s, until ctx ends. After "server shutting down"
// (0x01), which the whole fleet receives in the same millisecond, it waits a
// uniform random time in [0, min(1s, lease/4)] instead, so that the
// reconnections reach the restarted server or the standby spread out rather
// than all at once; a quarter of the lease keeps the gap short next to the
// time the lock was unowned anyway. Permanent errors (invalid input, server codes
// 0x10 and up, protocol violations, a TLS certificate or alert either side
// refused: ErrTLSRefused, *tls.CertificateVerificationError) return at once. Every attempt is a new
// connection at the back of the queue. fn runs at most once: whatever happens
// after it started is returned, never retried.
func (c *Client) DoRetry(ctx context.Context, name string, lease time.Duration, fn func(ctx context.Context, token uint64) error) error {
	var b backoff
	for {
		called, err := c.do(ctx, name, lease, fn)
		if err == nil || called || !transient(err) {
			return err
		}
		wait := b.next(rand.Int64N)
		if errors.Is(err, protocol.ErrShuttingDown) {
			wait = shutdownJitter(lease, rand.Int64N)
		}
		if werr := sleep(ctx, wait); werr != nil {
			return fmt.Errorf("%w; last attempt: %w", werr, err)
		}
	}
}

// transient reports whether a new connection may succeed where err failed.
func transient(err error) bool {
	var serverErr *ServerError
	if errors.As(err, &serverErr) {
		return serverErr.Retryable()
	}
	var dialErr *dialError
	if errors.As(err, &dialErr) {
		return dialErr.retryable()
	}
	return errors.Is(err, ErrConnectionClosed) || errors.Is(err, ErrHeartbeatTimeout)
}

// sleep waits for d or until ctx ends, whichever is first.
func sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
