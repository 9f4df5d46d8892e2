package protocol

import "fmt"

// Code is an ERROR frame's code. The code is the contract; the reason text that
// travels with it is for people and is never parsed.
type Code uint8

// The error codes of protocol version 1.
const (
	CodeShuttingDown           Code = 0x01
	CodeClosedByAdmin          Code = 0x02
	CodeUnsupportedVersion     Code = 0x10
	CodeFirstMessageNotAcquire Code = 0x11
	CodeDuplicateAcquire       Code = 0x12
	CodeUnknownMessageType     Code = 0x13
	CodeEmptyName              Code = 0x14
	CodeNameTooLong            Code = 0x15
	CodeInvalidUTF8            Code = 0x16
	CodeInvalidLease           Code = 0x17
	CodeNotAuthorized          Code = 0x18
)

// firstClientErrorCode splits the code space: below it, server conditions;
// from it on, client errors.
const firstClientErrorCode Code = 0x10

const unknownCodeTextTemplate = "unknown error code 0x%02x"

// Retryable reports whether the code describes a server condition (below 0x10:
// shutting down, closed by an administrator) after which a new connection may
// succeed, rather than an error in the client's request, which a new
// connection would repeat and which must be reported. The rule is by range, so
// codes added later classify themselves.
func (c Code) Retryable() bool { return c < firstClientErrorCode }

// String returns the canonical text of the code.
func (c Code) String() string {
	if e := c.Err(); e != nil {
		return e.text
	}
	return fmt.Sprintf(unknownCodeTextTemplate, uint8(c))
}

// Err returns the canonical error value of the code, or nil for a code this
// version of the protocol does not define.
func (c Code) Err() *Error {
	for _, e := range canonicalErrors {
		if e.Code == c {
			return e
		}
	}
	return nil
}

// Error is the canonical error of one code. The package exports one value per
// code; compare with errors.Is.
type Error struct {
	Code Code
	text string
}

func (e *Error) Error() string { return e.text }

// Retryable reports whether the error is a server condition after which a new
// connection may succeed (see Code.Retryable).
func (e *Error) Retryable() bool { return e.Code.Retryable() }

// The canonical errors, one per code.
var (
	ErrShuttingDown           = &Error{CodeShuttingDown, "server shutting down"}
	ErrClosedByAdmin          = &Error{CodeClosedByAdmin, "closed by administrator"}
	ErrUnsupportedVersion     = &Error{CodeUnsupportedVersion, "unsupported protocol version"}
	ErrFirstMessageNotAcquire = &Error{CodeFirstMessageNotAcquire, "first message must be ACQUIRE"}
	ErrDuplicateAcquire       = &Error{CodeDuplicateAcquire, "duplicate ACQUIRE"}
	ErrUnknownMessageType     = &Error{CodeUnknownMessageType, "unknown message type"}
	ErrEmptyName              = &Error{CodeEmptyName, "empty lock name"}
	ErrNameTooLong            = &Error{CodeNameTooLong, "lock name too long"}
	ErrInvalidUTF8            = &Error{CodeInvalidUTF8, "lock name is not valid UTF-8"}
	ErrInvalidLease           = &Error{CodeInvalidLease, "lease must be positive"}
	ErrNotAuthorized          = &Error{CodeNotAuthorized, "not authorized for lock"}
)

var canonicalErrors = [...]*Error{
	ErrShuttingDown, ErrClosedByAdmin, ErrUnsupportedVersion, ErrFirstMessageNotAcquire,
	ErrDuplicateAcquire, ErrUnknownMessageType, ErrEmptyName, ErrNameTooLong,
	ErrInvalidUTF8, ErrInvalidLease, ErrNotAuthorized,
}

// Codes lists every code defined by protocol version 1, in ascending order.
func Codes() []Code {
	codes := make([]Code, len(canonicalErrors))
	for i, e := range canonicalErrors {
		codes[i] = e.Code
	}
	return codes
}

// Label renders the code as it appears in logs and metric labels: 0x15.
func (c Code) Label() string {
	const hex = "0123456789abcdef"
	return string([]byte{'0', 'x', hex[c>>4], hex[c&0xf]})
}
