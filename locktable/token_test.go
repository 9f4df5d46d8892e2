package locktable_test

import (
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/monolock/monolock/locktable"
)

// fracOf is the part of now's second that has passed, in units of 2^-32 s
// (rounded down), written out for the tests with big integers rather than
// the shift-and-divide token.go uses. The constants in TestNextToken pin it.
func fracOf(now time.Time) uint64 {
	f := new(big.Int).Mul(big.NewInt(int64(now.Nanosecond())), new(big.Int).Lsh(big.NewInt(1), 32))
	return f.Quo(f, big.NewInt(int64(time.Second))).Uint64()
}

// wantFirst is the first-grant rule, ((s+1)<<32) | fraction: s is now's
// Unix second, a time before 1970 is second 0 with no fraction, and from
// the cap's second (2^32-1) on the token is the cap's floor.
func wantFirst(now time.Time) uint64 {
	switch s := now.Unix(); {
	case s < 0:
		return 1 << 32
	case s >= math.MaxUint32:
		return math.MaxUint32 << 32
	default:
		return uint64(s+1)<<32 + fracOf(now)
	}
}

// oldFirst is the first-grant rule before the fraction: (s+1)<<32, capped.
// It is kept here to show what the fraction fixes (TestCrashLoop).
func oldFirst(now time.Time) uint64 {
	s := min(max(now.Unix(), 0), math.MaxUint32-1)
	return uint64(s+1) << 32
}

// wantLater is the rule for every grant after the first:
// max(prev+1, s<<32), s clamped to [0, 2^32-1].
func wantLater(prev uint64, now time.Time) uint64 {
	s := min(max(now.Unix(), 0), math.MaxUint32)
	return max(prev+1, uint64(s)<<32)
}

func TestNextToken(t *testing.T) {
	const maxFloor = uint64(math.MaxUint32) << 32
	for _, tc := range []struct {
		name string
		prev uint64
		now  time.Time
		want uint64
	}{
		// prev == 0: the first grant of a process takes the next second,
		// plus the fraction of the current second that has passed
		// (ns * 2^32 / 10^9, rounded down).
		{"first grant at a whole second", 0, time.Unix(10, 0), 11 << 32},
		{"first grant a nanosecond in", 0, time.Unix(10, 1), 11<<32 | 4},
		{"first grant a quarter second in", 0, time.Unix(10, 250_000_000), 11<<32 | 1<<30},
		{"first grant half a second in", 0, time.Unix(10, 500_000_000), 11<<32 | 1<<31},
		{"first grant a millisecond in", 0, time.Unix(10, 1_000_000), 11<<32 | 4_294_967},
		{"first grant at t0", 0, time.Unix(1_700_000_000, 123_456_789), 1_700_000_001<<32 | 530_242_871},
		{"first grant at the end of a second", 0, time.Unix(1_700_000_000, 999_999_999), 1_700_000_001<<32 | 0xffff_fffb},
		{"first grant at the epoch", 0, time.Unix(0, 0), 1 << 32},
		{"first grant just after the epoch", 0, time.Unix(0, 500_000_000), 1<<32 | 1<<31},
		{"first grant before 1970", 0, time.Unix(-100, 0), 1 << 32},
		{"first grant before 1970 has no fraction", 0, time.Unix(-1, 500_000_000), 1 << 32},
		{"first grant at the zero time", 0, time.Time{}, 1 << 32},
		{"first grant a second before the cap", 0, time.Unix(math.MaxUint32-2, 0), maxFloor - 1<<32},
		{"first grant a second before the cap, half in", 0, time.Unix(math.MaxUint32-2, 500_000_000), maxFloor - 1<<32 | 1<<31},
		{"first grant in the second before the cap's", 0, time.Unix(math.MaxUint32-1, 0), maxFloor},
		{"first grant at the end of the second before the cap's", 0, time.Unix(math.MaxUint32-1, 999_999_999), maxFloor | 0xffff_fffb},
		{"first grant in the cap's second", 0, time.Unix(math.MaxUint32, 0), maxFloor},
		{"first grant in the cap's second has no fraction", 0, time.Unix(math.MaxUint32, 500_000_000), maxFloor},
		{"first grant past the cap", 0, time.Unix(1<<40, 0), maxFloor},
		{"first grant past the cap has no fraction", 0, time.Unix(1<<40, 999_999_999), maxFloor},
		// prev > 0: later grants, max(prev+1, seconds<<32), no fraction.
		{"floor ignores sub-second", 1, time.Unix(10, 1), 10 << 32},
		{"floor ignores sub-second late in the second", 1, time.Unix(10, 999_999_999), 10 << 32},
		{"same second counts up", 10<<32 + 7, time.Unix(10, 0), 10<<32 + 8},
		{"clock behind counts up", 10 << 32, time.Unix(3, 0), 10<<32 + 1},
		{"next second jumps", 10<<32 + 7, time.Unix(11, 0), 11 << 32},
		{"epoch is zero seconds", 5, time.Unix(0, 0), 6},
		{"pre-1970 is zero seconds", 5, time.Unix(-100, 0), 6},
		{"zero time is zero seconds", 41, time.Time{}, 42},
		{"seconds capped at 2^32-1", 1, time.Unix(1<<32+5, 0), maxFloor},
		{"past the cap counts up", maxFloor, time.Unix(1<<40, 0), maxFloor + 1},
		{"last token there is", math.MaxUint64 - 1, time.Unix(0, 0), math.MaxUint64},
	} {
		if got := locktable.NextToken(tc.prev, tc.now); got != tc.want {
			t.Errorf("%s: NextToken(%#x, %v) = %#x, want %#x", tc.name, tc.prev, tc.now, got, tc.want)
		}
		// The helpers the other tests use agree with the hand-written values.
		helper := wantLater(tc.prev, tc.now)
		if tc.prev == 0 {
			helper = wantFirst(tc.now)
		}
		if helper != tc.want {
			t.Errorf("%s: test helper says %#x, want %#x", tc.name, helper, tc.want)
		}
	}
}

func TestNextTokenExhausted(t *testing.T) {
	mustPanic(t, "NextToken(MaxUint64)", func() { locktable.NextToken(math.MaxUint64, time.Unix(0, 0)) })
}

// TestFirstGrantSkipsASecond checks a fresh table's first grant, at
// instants across second S, against (S+1)<<32 plus the fraction, and the
// grant after it.
func TestFirstGrantSkipsASecond(t *testing.T) {
	const s = 1_700_000_000
	for _, ns := range []int64{0, 1, 2, 3, 123_456_789, 500_000_000, 999_999_998, 999_999_999} {
		tb := locktable.New[*session]()
		var a, b locktable.Claim[*session]
		now := time.Unix(s, ns)
		tb.Acquire(&a, "a", now)
		if want := wantFirst(now); a.Token() != want {
			t.Errorf("first grant at %v: token %#x, want (S+1)<<32 | fraction = %#x", now, a.Token(), want)
		}
		if a.Token()>>32 != s+1 {
			t.Errorf("first grant at %v: token %#x is not in second S+1", now, a.Token())
		}
		tb.Acquire(&b, "b", now)
		if b.Token() != a.Token()+1 {
			t.Errorf("second grant at %v: token %#x, want %#x", now, b.Token(), a.Token()+1)
		}
	}
}

// TestFirstGrantFractionIncreases checks that a first grant one nanosecond
// later is at least 4 tokens larger (2^32/10^9 is 4.29...), all across a
// second and across the boundary into the next one: the room a predecessor
// has to count up in before its successor's first token.
func TestFirstGrantFractionIncreases(t *testing.T) {
	const s = 1_700_000_000
	var instants []time.Time
	for _, ns := range []int64{0, 123_456_789, 500_000_000, 999_998_000} {
		for i := range int64(2_000) {
			instants = append(instants, time.Unix(s, ns+i))
		}
	}
	instants = append(instants, time.Unix(s+1, 0), time.Unix(s+1, 1))
	for i := 1; i < len(instants); i++ {
		before, after := instants[i-1], instants[i]
		tb, ta := locktable.NextToken(0, before), locktable.NextToken(0, after)
		if ta < tb+4 {
			t.Fatalf("first grant at %v: %#x; %v later at %v: %#x, want at least 4 more",
				before, tb, after.Sub(before), after, ta)
		}
	}
}

// grantAll runs the token rule over a process's grants at the given
// instants: first for the first grant, wantLater for every other one.
func grantAll(first func(time.Time) uint64, at []time.Time) []uint64 {
	toks := make([]uint64, len(at))
	for i, now := range at {
		if i == 0 {
			toks[i] = first(now)
		} else {
			toks[i] = wantLater(toks[i-1], now)
		}
	}
	return toks
}

// TestCrashLoop is the case the fraction exists for: process A makes its
// first grant at S.x and n more before it crashes, all within a short gap;
// process B (a fresh Table, the restarted server) makes its first grant at
// S.x+gap, often in the same second S. With the old rule, (s+1)<<32, both
// first grants are (S+1)<<32 and B repeats A's first token; with the
// fraction, B starts gap*2^32 tokens (4.29 a nanosecond) above where A
// started, above all of A's tokens unless A issued 4 or more a nanosecond.
// Each case is run on a real Table and on the two rules written out.
func TestCrashLoop(t *testing.T) {
	const s = 1_700_000_000
	for _, tc := range []struct {
		name    string
		x       time.Duration // A's first grant, into second S
		gap     time.Duration // from A's first grant to B's
		n       int           // A's grants after its first, spread over gap
		newSafe bool          // B's first token is above all of A's, new rule
		oldSafe bool          // the same with the old rule
	}{
		{"5000 grants in a millisecond", 123 * time.Millisecond, time.Millisecond, 5_000, true, false},
		{"5000 grants in a millisecond from second start", 0, time.Millisecond, 5_000, true, false},
		{"5000 grants in the second's last millisecond", 998 * time.Millisecond, time.Millisecond, 5_000, true, false},
		{"100k grants in 100 ms", 400 * time.Millisecond, 100 * time.Millisecond, 100_000, true, false},
		{"no grants between, a nanosecond apart", 0, 1, 0, true, false},
		{"3 grants in a nanosecond", 0, 1, 3, true, false},
		// The limit: 4 a nanosecond fills the 4 tokens the fraction adds.
		{"4 grants in a nanosecond", 0, 1, 4, false, false},
		// Across a second boundary the old rule was safe too: the
		// fraction is for restarts within the predecessor's first second.
		{"5000 grants across a second boundary", 999_500 * time.Microsecond, time.Millisecond, 5_000, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			startA := time.Unix(s, int64(tc.x))
			startB := startA.Add(tc.gap)
			at := []time.Time{startA}
			for i := range tc.n {
				// Strictly before B's first grant: A has crashed by then.
				at = append(at, startA.Add(tc.gap*time.Duration(i)/time.Duration(tc.n)))
			}

			// The real Table.
			a := locktable.New[*session]()
			var h locktable.Claim[*session]
			var maxA uint64
			for _, now := range at {
				if !a.Acquire(&h, "L", now) {
					t.Fatalf("A's grant at %v refused", now)
				}
				if h.Token() <= maxA {
					t.Fatalf("A's token %#x at %v after %#x", h.Token(), now, maxA)
				}
				maxA = h.Token()
				a.Release(&h, now)
			}
			b := locktable.New[*session]()
			var c locktable.Claim[*session]
			b.Acquire(&c, "L", startB)
			if got := c.Token() > maxA; got != tc.newSafe {
				t.Errorf("table: B's first token %#x at %v, A's last %#x at first grant %v: B above A = %v, want %v",
					c.Token(), startB, maxA, startA, got, tc.newSafe)
			}

			// The rules written out: the new one must agree with the table
			// token for token, the old one shows what the fraction fixes.
			newA := grantAll(wantFirst, at)
			if newA[len(newA)-1] != maxA || wantFirst(startB) != c.Token() {
				t.Errorf("new rule gives A up to %#x and B %#x, table %#x and %#x",
					newA[len(newA)-1], wantFirst(startB), maxA, c.Token())
			}
			oldA := grantAll(oldFirst, at)
			if got := oldFirst(startB) > oldA[len(oldA)-1]; got != tc.oldSafe {
				t.Errorf("old rule: B's first token %#x, A's last %#x: B above A = %v, want %v",
					oldFirst(startB), oldA[len(oldA)-1], got, tc.oldSafe)
			}
			if startB.Unix() == s && oldFirst(startB) != oldA[0] {
				t.Errorf("old rule, same second: B's first %#x, want a repeat of A's first %#x", oldFirst(startB), oldA[0])
			}
		})
	}
}

// TestRestartInTheSameSecond simulates a restart without waiting: a process
// makes many grants up to second S, then a fresh Table (the restarted
// process) grants within the same second S, even at an earlier sub-second
// instant than the old process's last grant. Every new token must be above
// every old one. Had the first grant no skip (max(prev+1, s<<32) from the
// start), the first new token would be S<<32, the same as the old process's
// first grant in S.
func TestRestartInTheSameSecond(t *testing.T) {
	const s = 1_700_000_000
	old := locktable.New[*session]()
	var maxOld uint64
	var h locktable.Claim[*session]
	// The old process started a few seconds earlier and grants a thousand
	// times a second, ending late in second S.
	for i := range 5000 {
		at := time.Unix(s-4, 0).Add(time.Duration(i) * time.Millisecond)
		old.Acquire(&h, "L", at)
		maxOld = max(maxOld, h.Token())
		old.Release(&h, at)
	}
	if maxOld < uint64(s)<<32 {
		t.Fatalf("old process ended below second S's floor: %#x", maxOld)
	}
	for _, ns := range []int64{0, 999_000_000, 999_999_999} {
		restarted := locktable.New[*session]()
		var a, b locktable.Claim[*session]
		at := time.Unix(s, ns)
		restarted.Acquire(&a, "L", at)
		restarted.Acquire(&b, "M", at)
		if a.Token() <= maxOld || b.Token() <= a.Token() {
			t.Errorf("restart at %v: tokens %#x, %#x; old process reached %#x", at, a.Token(), b.Token(), maxOld)
		}
	}
}

// TestRestartAfterAFullSecond takes the rate bound to its limit: the old
// process issued 2^32-1 tokens in second S (the floor stands in for the
// grants that were not made one by one). The restarted process's first
// token is still above the last of them.
func TestRestartAfterAFullSecond(t *testing.T) {
	const s = 1_700_000_000
	at := time.Unix(s, 999_999_999)
	old := locktable.New[*session]()
	var h locktable.Claim[*session]
	old.Acquire(&h, "L", time.Unix(s-1, 0))
	old.Release(&h, at)
	old.SetLastToken(uint64(s)<<32 + 1<<32 - 2)
	old.Acquire(&h, "L", at)
	if want := uint64(s+1)<<32 - 1; h.Token() != want {
		t.Fatalf("old process's last token %#x, want %#x", h.Token(), want)
	}
	restarted := locktable.New[*session]()
	var c locktable.Claim[*session]
	restarted.Acquire(&c, "L", time.Unix(s, 0))
	if c.Token() <= h.Token() {
		t.Errorf("restarted token %#x not above the old process's %#x", c.Token(), h.Token())
	}
}

// TestRestartChain runs a chain of processes, each making its first grant
// in the second of its predecessor's last grant (but a second after its
// predecessor's first), and checks one strictly increasing sequence over all
// of them.
func TestRestartChain(t *testing.T) {
	now := time.Unix(1_700_000_000, 900_000_000)
	var last uint64
	for gen := range 6 {
		tb := locktable.New[*session]()
		var h locktable.Claim[*session]
		// Grant across one second boundary, then die.
		for range 20 {
			tb.Acquire(&h, "L", now)
			if h.Token() <= last {
				t.Fatalf("process %d at %v: token %#x after %#x", gen, now, h.Token(), last)
			}
			last = h.Token()
			tb.Release(&h, now)
			now = now.Add(60 * time.Millisecond)
		}
		now = now.Add(-100 * time.Millisecond) // restart before the last grant's instant
	}
}
