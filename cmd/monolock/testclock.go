package main

import (
	"os"
	"strings"
	"sync"
	"time"
)

// testClockOffsetEnv names a file holding a Go duration ("-1h", "0s") that
// the server adds to its wall clock (tokens, audit times; never a lease or
// a deadline), reread while it runs. It is for tests only: the failover
// harness (bench/failover-etcd) steps one node's clock back without
// stepping the machine's, which every other process shares. It is not a
// setting (no flag, not in -h); never set it on a real server.
const testClockOffsetEnv = "MONOLOCK_TEST_WALL_CLOCK_OFFSET_FILE"

// fileClockReread is how old the offset may be: a harness that rewrites
// the file waits this long before it relies on the step.
const fileClockReread = 10 * time.Millisecond

// fileClockOffset is the offset in a file, reread at most every
// fileClockReread. An unreadable file or an unparsable duration keeps the
// last offset (0 at first).
type fileClockOffset struct {
	path string

	mu     sync.Mutex // the loop and the ticker goroutine both read it
	readAt time.Time
	offset time.Duration
}

func (f *fileClockOffset) get() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if now := time.Now(); f.readAt.IsZero() || now.Sub(f.readAt) >= fileClockReread {
		f.readAt = now
		if b, err := os.ReadFile(f.path); err == nil {
			if d, err := time.ParseDuration(strings.TrimSpace(string(b))); err == nil {
				f.offset = d
			}
		}
	}
	return f.offset
}
