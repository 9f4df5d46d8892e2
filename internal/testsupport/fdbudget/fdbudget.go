// Package fdbudget sizes the connection counts of the tests and harnesses to
// the process's descriptor limit (RLIMIT_NOFILE), so that a harness on a
// machine with a low limit runs fewer connections and says so, instead of
// failing half-way with "too many open files".
package fdbudget

import (
	"fmt"
	"syscall"
)

// Limits returns the soft and hard descriptor limits of this process.
func Limits() (soft, hard uint64, err error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, 0, fmt.Errorf("getrlimit RLIMIT_NOFILE: %w", err)
	}
	return rl.Cur, rl.Max, nil
}

// RaiseSoft raises the soft limit to the hard one (child processes inherit
// it) and returns both.
func RaiseSoft() (soft, hard uint64, err error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, 0, fmt.Errorf("getrlimit RLIMIT_NOFILE: %w", err)
	}
	if rl.Cur < rl.Max {
		rl.Cur = rl.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
			return 0, 0, fmt.Errorf("setrlimit RLIMIT_NOFILE to %d: %w", rl.Max, err)
		}
	}
	return rl.Cur, rl.Max, nil
}

// Room is how many of want connections fit under limit when each costs
// perConn descriptors (2 when both ends are in this process) and margin
// descriptors stay free for everything else: want when they all fit,
// otherwise fewer, never below 0.
func Room(limit uint64, want, perConn, margin int) int {
	avail := int64(min(limit, 1<<40)) - int64(margin)
	if avail <= 0 || perConn <= 0 {
		return 0
	}
	return int(min(int64(want), avail/int64(perConn)))
}

// Fit is Room under the current soft limit.
func Fit(want, perConn, margin int) (int, error) {
	soft, _, err := Limits()
	if err != nil {
		return 0, err
	}
	return Room(soft, want, perConn, margin), nil
}
