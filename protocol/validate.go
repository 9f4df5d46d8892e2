package protocol

import (
	"fmt"
	"math"
	"time"
	"unicode/utf8"
)

// ValidateName reports why name cannot be a lock name, or nil. Names are raw
// bytes compared exactly: no trimming, no case folding, no normalization.
func ValidateName(name string) error {
	switch {
	case len(name) == 0:
		return ErrEmptyName
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: %d bytes, the limit is %d", ErrNameTooLong, len(name), MaxNameLen)
	case !utf8.ValidString(name):
		return ErrInvalidUTF8
	}
	return nil
}

// MaxLease is the longest lease the wire can carry (lease_ms is a uint32).
const MaxLease = time.Duration(math.MaxUint32) * time.Millisecond

// LeaseMS converts a lease to the wire's whole milliseconds. A lease must be at
// least one millisecond and at most MaxLease; a fraction of a millisecond rounds
// up, so the server never drops a session earlier than its client asked.
func LeaseMS(lease time.Duration) (uint32, error) {
	if lease < time.Millisecond {
		return 0, fmt.Errorf("%w: %v is shorter than 1ms", ErrInvalidLease, lease)
	}
	if lease > MaxLease {
		return 0, fmt.Errorf("%w: %v is longer than the wire maximum %v", ErrInvalidLease, lease, MaxLease)
	}
	ms := (lease + time.Millisecond - 1) / time.Millisecond
	return uint32(ms), nil
}
