package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
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
	leaseMS, err := protocol.LeaseMS(lease)
	if err != nil {
		return nil, err
	}
	if err := protocol.ValidateName(name); err != nil {
		return nil, err
	}
	conn, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	l := startLock(conn, name, lease, leaseMS, c.observe)
	return l.waitFor(ctx, l.answered)
}

// Acquire returns once the lock is granted, waiting in the lock's queue as long
// as ctx allows; cancelling ctx while waiting leaves the queue and returns
// ctx.Err() at once. ctx does not bound the hold: the lock stays held until
// Close or loss (watch Lost). The caller must Close the lock.
func (c *Client) Acquire(ctx context.Context, name string, lease time.Duration) (*Lock, error) {
	l, err := c.Enqueue(ctx, name, lease)
	if err != nil {
		return nil, err
	}
	return l.waitFor(ctx, l.granted)
}

// TryAcquire is Acquire without waiting: when the server queues the request
// (someone holds the lock) it closes the connection and returns ErrBusy.
func (c *Client) TryAcquire(ctx context.Context, name string, lease time.Duration) (*Lock, error) {
	l, err := c.Enqueue(ctx, name, lease)
	if err != nil {
		return nil, err
	}
	select {
	case <-l.granted:
		return l, nil
	default:
		_ = l.Close()
		return nil, ErrBusy
	}
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

// dial opens a connection within the connect timeout (TCP connect and TLS
// handshake), or ctx's deadline when that is sooner.
func (c *Client) dial(ctx context.Context) (net.Conn, error) {
	dialCtx, cancel := context.WithTimeout(ctx, c.connectTimeout)
	defer cancel()
	conn, err := c.dialer.DialContext(dialCtx, "tcp", c.address)
	if err == nil {
		return conn, nil
	}
	if refused := tlsRefusal(err); refused != nil {
		err = refused
	}
	e := &dialError{address: c.address, err: err}
	if ctx.Err() == nil && errors.Is(dialCtx.Err(), context.DeadlineExceeded) {
		e.timeout = c.connectTimeout
	}
	return nil, e
}

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
	var op *net.OpError
	if errors.As(cause, &op) && op.Op == "dial" && op.Err != nil {
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
