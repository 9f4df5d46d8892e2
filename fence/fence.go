package fence

import (
	"context"
	"errors"
	"fmt"
)

// ErrStale is the error every refused admit wraps: a newer holder's token has
// been admitted for the resource, so the caller's lock was handed on and its
// write must not land. Check it with errors.Is.
var ErrStale = errors.New("fence: stale token")

// Fence admits fencing tokens for named resources.
type Fence interface {
	// Admit records token for resource when it is greater than or equal to
	// the largest token admitted for resource so far and returns nil;
	// otherwise it returns an error wrapping ErrStale and records nothing.
	Admit(ctx context.Context, resource string, token uint64) error
}

// StaleError is the detail of a refused admit.
type StaleError struct {
	Resource string
	Token    uint64 // the token that was refused
	Highest  uint64 // the largest token admitted so far (0 when the store does not say)
}

func (e *StaleError) Error() string {
	if e.Token == 0 {
		return fmt.Sprintf("fence: token 0 for %q is never issued by a monolock server: pass the token of the lock you hold", e.Resource)
	}
	if e.Highest != 0 {
		return fmt.Sprintf("fence: stale token %d for %q: token %d was admitted, so the lock was handed on; stop the work and take the lock again", e.Token, e.Resource, e.Highest)
	}
	return fmt.Sprintf("fence: stale token %d for %q: a larger token was admitted, so the lock was handed on; stop the work and take the lock again", e.Token, e.Resource)
}

// Is makes errors.Is(err, ErrStale) true for a *StaleError.
func (e *StaleError) Is(target error) bool { return target == ErrStale }
