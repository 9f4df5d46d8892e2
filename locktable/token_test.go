package locktable_test

import (
	"math"
	"testing"
	"time"

	"github.com/monolock/monolock/locktable"
)

func TestNextToken(t *testing.T) {
	const maxFloor = uint64(math.MaxUint32) << 32
	for _, tc := range []struct {
		name string
		prev uint64
		now  time.Time
		want uint64
	}{
		// prev == 0: the first grant of a process takes the next second.
		{"first grant skips a second", 0, time.Unix(1_700_000_000, 999_999_999), 1_700_000_001 << 32},
		{"first grant ignores sub-second", 0, time.Unix(10, 0), 11 << 32},
		{"first grant at the epoch", 0, time.Unix(0, 0), 1 << 32},
		{"first grant before 1970", 0, time.Unix(-100, 0), 1 << 32},
		{"first grant at the zero time", 0, time.Time{}, 1 << 32},
		{"first grant a second before the cap", 0, time.Unix(math.MaxUint32-2, 0), maxFloor - 1<<32},
		{"first grant in the second before the cap's", 0, time.Unix(math.MaxUint32-1, 0), maxFloor},
		{"first grant in the cap's second", 0, time.Unix(math.MaxUint32, 0), maxFloor},
		{"first grant past the cap", 0, time.Unix(1<<40, 0), maxFloor},
		// prev > 0: later grants, max(prev+1, seconds<<32).
		{"floor ignores sub-second", 1, time.Unix(10, 1), 10 << 32},
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
	}
}

func TestNextTokenExhausted(t *testing.T) {
	mustPanic(t, "NextToken(MaxUint64)", func() { locktable.NextToken(math.MaxUint64, time.Unix(0, 0)) })
}

// TestFirstGrantSkipsASecond checks a fresh table's first grant, at any
// instant of second S, against (S+1)<<32, and the grants after it.
func TestFirstGrantSkipsASecond(t *testing.T) {
	const s = 1_700_000_000
	for _, ns := range []int64{0, 1, 500_000_000, 999_999_999} {
		tb := locktable.New[*session]()
		var a, b locktable.Claim[*session]
		now := time.Unix(s, ns)
		tb.Acquire(&a, "a", now)
		if want := uint64(s+1) << 32; a.Token() != want {
			t.Errorf("first grant at %v: token %#x, want (S+1)<<32 = %#x", now, a.Token(), want)
		}
		tb.Acquire(&b, "b", now)
		if b.Token() != a.Token()+1 {
			t.Errorf("second grant at %v: token %#x, want %#x", now, b.Token(), a.Token()+1)
		}
	}
}

// TestRestartInTheSameSecond simulates a restart without waiting: a process
// makes many grants up to second S, then a fresh Table (the restarted
// process) grants within the same second S, even at an earlier sub-second
// instant than the old process's last grant. Every new token must be above
// every old one. With the old scheme the first new token was S<<32, the same
// as the old process's first grant in S.
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
