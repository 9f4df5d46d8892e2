package poll

import (
	"context"
	"time"
)

// Sleep waits d, or less if ctx ends first: it returns nil after d, and
// ctx's error if ctx has ended, at once if it had ended already. It is the
// pause between two steps of a loop that must stop when its context does.
// (The Go client keeps its own copy: it imports nothing but protocol.)
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(max(d, 0))
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	return ctx.Err() // an ended context wins over a timer that fired with it
}
