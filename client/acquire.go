package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/monolock/monolock/protocol"
)

// Enqueue dials, sends ACQUIRE and returns as soon as the server has answered:
// the lock is then held (Granted is closed) or queued, and promotion closes
// Granted later. ctx bounds only the dial and the first reply; after that the
// lock lives until Close or loss. The caller must Close the lock.
//
// An invalid name or lease fails before dialing with the protocol package's
// errors (protocol.ErrInvalidLease, protocol.ErrEmptyName,
// protocol.ErrNameTooLong, protocol.ErrInvalidUTF8).
func (c *Client) Enqueue(ctx context.Context, name string, lease time.Duration) (*Lock, error) {
	l, err := c.begin(ctx, name, lease, waitForever)
	if err != nil {
		return nil, err
	}
	return l.waitFor(ctx, l.answered)
}

// Acquire returns once the lock is granted, waiting in the lock's queue as long
// as ctx allows; cancelling ctx while waiting leaves the queue and returns
// ctx.Err() at once. ctx does not bound the hold: the lock stays held until
// Close or loss (watch Lost). The caller must Close the lock.
func (c *Client) Acquire(ctx context.Context, name string, lease time.Duration) (*Lock, error) {
	return c.AcquireWithin(ctx, name, lease, waitForever)
}

// TryAcquire is Acquire without waiting: when the server queues the request
// (someone holds the lock) it leaves the queue (RELEASE, then the server's
// close) and returns ErrBusy.
func (c *Client) TryAcquire(ctx context.Context, name string, lease time.Duration) (*Lock, error) {
	return c.AcquireWithin(ctx, name, lease, 0)
}

// AcquireWithin is Acquire with a bound on the wait for the grant, counted
// from the start of the attempt (the dial): when the lock is queued and not
// granted within wait, it leaves the queue and returns an error matching
// ErrBusy; when the server has not answered the ACQUIRE within wait at all
// (or the connection is not up by then), an error matching
// ErrHeartbeatTimeout, which DoRetry would retry: the server is unavailable,
// not busy. A wait of 0 is TryAcquire; a negative one waits as long as ctx
// allows, as Acquire does. The connect timeout (Config.ConnectTimeout) still
// bounds the connect on its own.
func (c *Client) AcquireWithin(ctx context.Context, name string, lease, wait time.Duration) (*Lock, error) {
	if wait < 0 {
		wait = waitForever
	}
	l, err := c.begin(ctx, name, lease, wait)
	if err != nil {
		return nil, err
	}
	return l.waitFor(ctx, l.granted)
}

// begin validates the input and starts an attempt: its session dials and
// sends ACQUIRE.
func (c *Client) begin(ctx context.Context, name string, lease, wait time.Duration) (*Lock, error) {
	leaseMS, err := protocol.LeaseMS(lease)
	if err != nil {
		return nil, err
	}
	if err := protocol.ValidateName(name); err != nil {
		return nil, err
	}
	a := attempt{name: name, lease: lease, leaseMS: leaseMS, wait: wait, connectTimeout: c.connectTimeout, target: c.target()}
	return startLock(ctx, a, c.dial, c.observe), nil
}

// waitFor returns l once ready is closed. If the session ends first it returns
// why; if ctx ends first it closes l, which leaves the queue, and returns
// ctx.Err().
func (l *Lock) waitFor(ctx context.Context, ready <-chan struct{}) (*Lock, error) {
	select {
	case <-ready:
		return l, nil
	case <-l.done:
		return nil, l.err
	case <-ctx.Done():
		_ = l.Close()
		return nil, ctx.Err()
	}
}

// dial opens a connection to one of the candidates (the configured
// addresses, a name resolving to several addresses giving one candidate
// each), starting from the last one that worked and trying the others in
// turn when one fails, until one is up or ctx ends. The connect timeout is
// the rules' (step.go), which end ctx at its deadline.
func (c *Client) dial(ctx context.Context) (net.Conn, error) {
	var failures []error
	candidates := c.candidates(ctx)
	for i := range candidates {
		cand := &candidates[i]
		conn, err := c.dialOne(ctx, cand)
		if err == nil {
			if last := c.lastGood.Load(); last == nil || *last != cand.addr {
				c.lastGood.Store(&cand.addr)
			}
			return conn, nil
		}
		if refused := tlsRefusal(err); refused != nil {
			err = refused
		}
		failures = append(failures, err)
		if ctx.Err() != nil {
			break
		}
	}
	e := &dialError{address: c.target(), err: failures[0]}
	if len(failures) > 1 {
		e.err = dialFailures(failures)
	}
	return nil, e
}

// dialFailures is why each candidate address failed, in the order tried.
type dialFailures []error

func (f dialFailures) Error() string {
	parts := make([]string, len(f))
	for i, err := range f {
		parts[i] = err.Error()
	}
	return strings.Join(parts, "; ")
}

func (f dialFailures) Unwrap() []error { return f }

// dialError marks a failed dial, which DoRetry retries unless it is a
// configuration problem.
type dialError struct {
	address string
	err     error
	timeout time.Duration // the connect timeout, when it ended the dial
}

// Error names the address once: the net package's own dial error already
// says "dial tcp ADDRESS: ", so only the cause under it is repeated here.
func (e *dialError) Error() string {
	cause := e.err
	if op, ok := cause.(*net.OpError); ok && op.Op == "dial" && op.Err != nil {
		cause = op.Err
	}
	if e.timeout > 0 {
		return fmt.Sprintf("monolock: dial %s: the TCP connect and TLS handshake did not finish within %v (Config.ConnectTimeout): is a monolock server listening there, with TLS if the Dialer uses it? (%v)", e.address, e.timeout, cause)
	}
	return fmt.Sprintf("monolock: dial %s: %v", e.address, cause)
}

// Unwrap returns the dial's cause, or ErrConnectTimeout when the connect
// timeout ended it: the net package reports that as a timeout that matches
// context.DeadlineExceeded, which belongs to the caller's ctx.
func (e *dialError) Unwrap() error {
	if e.timeout > 0 {
		return ErrConnectTimeout
	}
	return e.err
}

// retryable reports whether another dial may succeed: not for a malformed
// address or a TLS setup that the peer rejects or cannot verify.
func (e *dialError) retryable() bool {
	var (
		addrErr   *net.AddrError
		verifyErr *tls.CertificateVerificationError
		recordErr tls.RecordHeaderError
		alertErr  tls.AlertError
	)
	return !errors.As(e.err, &addrErr) && !errors.As(e.err, &verifyErr) &&
		!errors.As(e.err, &recordErr) && !errors.As(e.err, &alertErr) &&
		!errors.Is(e.err, ErrTLSRefused)
}
