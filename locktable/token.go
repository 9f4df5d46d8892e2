package locktable

import (
	"math"
	"time"
)

// NextToken is the fencing-token scheme. prev is the last token this process
// issued, or the floor it restored with SetLastToken, or 0 if neither: token 0
// is never issued, so 0 means "this process has granted nothing yet". Then
//
//	first grant of a process (prev == 0): (unixSeconds(now)+1) << 32
//	every later grant:                    max(prev+1, unixSeconds(now) << 32)
//
// A time before 1970 counts as 0 seconds. Tokens from one Table strictly
// increase over every grant across all locks (one global sequence).
//
// The prev+1 term makes the sequence strictly increasing whatever the clock
// does, including stepping back. The clock term lets a restarted server (or a
// standby taking over) issue larger tokens than its predecessor without storing anything and without waiting: a process's
// first grant skips ahead to the next second, so it exceeds every token the
// predecessor issued up to and including the current second. That holds
// provided
//
//   - the wall clock did not step back across the restart;
//   - the predecessor issued fewer than 2^32 tokens in any two consecutive
//     seconds, so that counting up never carried it past the next second's
//     clock term;
//   - the predecessor's own first grant was in an earlier second than the
//     new process's first grant. Two processes that both make their first
//     grant in the same second start from the same token; a supervisor that
//     waits a second before restarting (systemd's RestartSec=1s) rules that
//     out.
//
// A standby counts as a new process however long it idled, as long as its
// Table has never granted. A Table given a floor with SetLastToken does not
// skip ahead: the floor is taken to be at or above every token issued
// before it.
//
// Seconds are capped at 2^32-1 (the year 2106) so the shift cannot wrap: a
// first grant in the cap's second or later takes the cap's floor, not one
// second more, so from then on a restart is not guaranteed larger tokens,
// and tokens just count up from the cap. NextToken panics if prev is
// math.MaxUint64: there is no larger token, and issuing a smaller one would
// break fencing, which is worse than stopping.
func NextToken(prev uint64, now time.Time) uint64 {
	if prev == math.MaxUint64 {
		panic("locktable: fencing-token space exhausted")
	}
	s := unixSeconds(now)
	if prev == 0 {
		// s+1 <= 2^32 cannot overflow; the min keeps the shift from
		// wrapping to 0 at the cap.
		return min(s+1, math.MaxUint32) << 32
	}
	return max(prev+1, s<<32)
}

// unixSeconds is now's Unix time in whole seconds, clamped to
// [0, 2^32-1] so that shifting it left by 32 cannot wrap.
func unixSeconds(now time.Time) uint64 {
	s := now.Unix()
	switch {
	case s <= 0:
		return 0
	case s > math.MaxUint32:
		return math.MaxUint32
	}
	return uint64(s)
}
