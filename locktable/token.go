package locktable

import (
	"math"
	"time"
)

// NextToken is the fencing-token scheme. prev is the last token this process
// issued, or 0 if it has issued none: token 0
// is never issued, so 0 means "this process has granted nothing yet". Then
//
//	first grant of a process (prev == 0): ((unixSeconds(now)+1) << 32) | fraction(now)
//	every later grant:                    max(prev+1, unixSeconds(now) << 32)
//
// where fraction(now) is the part of the current second that has passed, in
// units of 2^-32 s (a quarter of a nanosecond). A time before 1970 counts as
// 0 seconds. Tokens from one Table strictly increase over every grant across
// all locks (one global sequence).
//
// The prev+1 term makes the sequence strictly increasing whatever the clock
// does, including stepping back. The clock term lets a restarted server (or a
// standby taking over) issue larger tokens than its predecessor without
// storing anything and without waiting: a process's first grant skips a
// second ahead of its clock, and its own counting up starts there. A
// predecessor's tokens are at most its first grant's token plus the number
// of grants it made since, or its latest second's clock term plus grants, so
// the new process's first token exceeds every one of them provided
//
//   - the wall clock did not step back across the restart;
//   - the predecessor issued fewer than 2^32 tokens in any two consecutive
//     seconds (some 2 billion a second);
//   - if both processes made their first grant in the same second, the
//     predecessor issued fewer than 4 tokens per nanosecond between the two
//     first grants: the fraction makes the later start the larger one. A
//     restart takes milliseconds, and a server grants some 10^5 times a
//     second, so this leaves a margin of about 10^4.
//
// A standby counts as a new process however long it idled, as long as its
// Table has never granted.
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
		if s >= math.MaxUint32 {
			return math.MaxUint32 << 32
		}
		return (s+1)<<32 | fraction(now)
	}
	return max(prev+1, s<<32)
}

// fraction is the part of now's second that has passed, in units of 2^-32 s.
func fraction(now time.Time) uint64 {
	if now.Unix() < 0 {
		return 0
	}
	return uint64(now.Nanosecond()) << 32 / uint64(time.Second)
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
