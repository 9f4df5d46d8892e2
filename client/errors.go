package client

import (
	"errors"
	"fmt"

	"github.com/monolock/monolock/protocol"
)

// Why a lock ended other than by Close. The returned errors wrap these with
// detail; compare with errors.Is.
var (
	// ErrHeartbeatTimeout: no WAITING or ACQUIRED arrived within 0.8 × lease of
	// the last acknowledged send, so the server may be about to drop the session.
	ErrHeartbeatTimeout = errors.New("monolock: no confirmation from the server within 0.8 × lease")
	// ErrConnectionClosed: the connection ended (end of stream, read or write
	// failure) without an ERROR frame.
	ErrConnectionClosed = errors.New("monolock: connection lost")
	// ErrProtocolViolation: the server sent something the protocol does not allow
	// at that point (an unknown frame type, an unsolicited reply, WAITING after
	// ACQUIRED, a changed token). The client trusts nothing after that.
	ErrProtocolViolation = errors.New("monolock: protocol violation by the server")
	// ErrTLSRefused: the server ended the connection with a TLS alert, which
	// it sends when it refuses this client's TLS setup, above all the
	// client's certificate (expired, from a CA it does not trust, none):
	// during the handshake under TLS 1.2, on the first read under TLS 1.3,
	// where the server checks the certificate after the client's side of the
	// handshake has completed. Another connection would get the same answer:
	// DoRetry does not retry it.
	ErrTLSRefused = errors.New("monolock: the server refused the TLS connection")
)

// ErrConnectTimeout: the TCP connect (and TLS handshake) did not finish
// within Config.ConnectTimeout while the caller's ctx was still live. It is
// the client's own deadline, not the caller's: it does not match
// context.DeadlineExceeded, so code that reads that as "my deadline passed"
// (busy, gave up waiting) does not take an unreachable or stalled server for
// it. The server is unavailable; DoRetry retries it.
var ErrConnectTimeout = errors.New("monolock: connect timeout")

// ErrBusy is returned by TryAcquire when the server queued the request because
// someone else holds the lock.
var ErrBusy = errors.New("monolock: lock is busy")

// ErrReleased is the cause of a Lock's context after Close when the lock had
// not been lost before.
var ErrReleased = errors.New("monolock: lock released")

// ServerError is an ERROR frame from the server. The server closes the
// connection after sending it.
type ServerError struct {
	Code protocol.Code
	// Reason is for people; branch on Code (or errors.Is with the protocol
	// package's canonical errors), never on the text.
	Reason string
}

func (e *ServerError) Error() string {
	reason := e.Reason
	if reason == "" {
		reason = e.Code.String()
	}
	return fmt.Sprintf("monolock: server error 0x%02x: %s", uint8(e.Code), reason)
}

// Retryable reports whether the code is a server condition (below 0x10) after
// which a new connection may succeed, rather than an error in the request.
// Unknown codes classify by the same range. DoRetry retries exactly these.
func (e *ServerError) Retryable() bool { return e.Code.Retryable() }

// Unwrap returns the protocol package's canonical error for the code, so that
// errors.Is(err, protocol.ErrShuttingDown) works; nil for an unknown code.
func (e *ServerError) Unwrap() error {
	if canonical := e.Code.Err(); canonical != nil {
		return canonical
	}
	return nil
}
