package main

import (
	"testing"
	"time"

	"github.com/monolock/monolock/locktable"
)

// TestStandbyClockBehind models what the harness cannot show with one shared
// clock: a standby whose clock is behind the old primary's. It applies the
// token rule (locktable.NextToken) to an old primary that granted every
// millisecond for ten seconds and a standby whose first grant comes D = 2s
// after the old primary's last, read on a clock behind by skew. The
// documented condition — the standby's clock, at its first grant, reads a
// second no earlier than the old primary's did at its last grant — must
// order the tokens; a skew beyond D plus a second must be able to break the
// order (so the condition is not a formality).
func TestStandbyClockBehind(t *testing.T) {
	start := time.Unix(1_800_000_000, 250_000_000)
	var last uint64
	var lastAt time.Time
	for at := start; at.Before(start.Add(10 * time.Second)); at = at.Add(time.Millisecond) {
		last = locktable.NextToken(last, at)
		lastAt = at
	}
	const d = 2 * time.Second
	for _, c := range []struct {
		skew      time.Duration
		condition bool // the documented condition holds
		ordered   bool
	}{
		{0, true, true},
		{time.Second, true, true},
		{d, true, true},                                        // reads the old primary's last second exactly
		{d + 500*time.Millisecond, false, true},                // same second minus a little: the +1 second still covers it
		{d + time.Second + 800*time.Millisecond, false, false}, // a second and more behind: the order breaks
		{10 * time.Second, false, false},
	} {
		reading := lastAt.Add(d).Add(-c.skew)
		first := locktable.NextToken(0, reading)
		condition := reading.Unix() >= lastAt.Unix()
		if condition != c.condition {
			t.Fatalf("skew %v: condition %v, want %v (test table wrong)", c.skew, condition, c.condition)
		}
		if ordered := first > last; ordered != c.ordered {
			t.Errorf("skew %v: standby's first token %d > old primary's last %d is %v, want %v", c.skew, first, last, ordered, c.ordered)
		}
		if condition && first <= last {
			t.Errorf("skew %v: the documented condition holds but the tokens are not ordered", c.skew)
		}
	}
}
