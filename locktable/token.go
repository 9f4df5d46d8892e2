package locktable

import (
	"math"
	"time"
)

// NextToken is the fencing-token scheme: max(prev+1, unixSeconds(now) << 32).
// A time before 1970 counts as 0 seconds. Tokens from one Table strictly
// increase over every grant across all locks (one global sequence).
//
// The prev+1 term makes the sequence strictly increasing whatever the clock
// does, including stepping back. The clock term lets a restarted server (or a
// standby taking over) issue larger tokens than its predecessor without
// storing anything: if its first grant comes more than one second (in wall
// clock time) after the old server's last grant, the new floor
// unixSeconds<<32 exceeds every token the old server issued, as long as the
// old server issued fewer than 2^32 tokens in any one second (leaving the
// floor behind) and the wall clock did not step back across the restart.
//
// Seconds are capped at 2^32-1 (the year 2106) so the shift cannot wrap; past
// that the tokens just count up from the cap. NextToken panics if prev is
// math.MaxUint64: there is no larger token, and issuing a smaller one would
// break fencing, which is worse than stopping.
func NextToken(prev uint64, now time.Time) uint64 {
	if prev == math.MaxUint64 {
		panic("locktable: fencing-token space exhausted")
	}
	next := prev + 1
	if floor := clockFloor(now); floor > next {
		return floor
	}
	return next
}

// clockFloor is unixSeconds(now) << 32, clamped to the representable range.
func clockFloor(now time.Time) uint64 {
	s := now.Unix()
	switch {
	case s <= 0:
		return 0
	case s > math.MaxUint32:
		s = math.MaxUint32
	}
	return uint64(s) << 32
}
