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
		{"first grant takes the clock floor", 0, time.Unix(1_700_000_000, 999_999_999), 1_700_000_000 << 32},
		{"floor ignores sub-second", 0, time.Unix(10, 1), 10 << 32},
		{"same second counts up", 10<<32 + 7, time.Unix(10, 0), 10<<32 + 8},
		{"clock behind counts up", 10 << 32, time.Unix(3, 0), 10<<32 + 1},
		{"next second jumps", 10<<32 + 7, time.Unix(11, 0), 11 << 32},
		{"epoch is zero seconds", 0, time.Unix(0, 0), 1},
		{"pre-1970 is zero seconds", 0, time.Unix(-100, 0), 1},
		{"zero time is zero seconds", 41, time.Time{}, 42},
		{"seconds capped at 2^32-1", 0, time.Unix(1<<32+5, 0), maxFloor},
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
