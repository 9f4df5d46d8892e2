package failkit

import (
	"strings"
	"testing"
	"time"
)

func at(ms int) int64 {
	return time.Unix(1_800_000_000, 0).Add(time.Duration(ms) * time.Millisecond).UnixNano()
}

// Two holds of one lock one after the other do not overlap; a third that
// begins before the second ended does, and so does one after a hold that
// never ended.
func TestOverlaps(t *testing.T) {
	events := []Event{
		{Kind: "granted", C: 0, Hold: 1, Lock: "x", Token: 10, At: at(0)},
		{Kind: "ended", C: 0, Hold: 1, Lock: "x", Token: 10, At: at(100)},
		{Kind: "granted", C: 1, Hold: 1, Lock: "x", Token: 11, At: at(100)}, // at the end's instant: no overlap
		{Kind: "granted", C: 2, Hold: 1, Lock: "x", Token: 12, At: at(150)}, // before hold (1,1) ended
		{Kind: "ended", C: 1, Hold: 1, Lock: "x", Token: 11, At: at(200)},
		{Kind: "ended", C: 2, Hold: 1, Lock: "x", Token: 12, At: at(300)},
		{Kind: "granted", C: 3, Hold: 1, Lock: "y", Token: 13, At: at(0)}, // never ended
		{Kind: "granted", C: 4, Hold: 1, Lock: "y", Token: 14, At: at(500)},
		{Kind: "ended", C: 4, Hold: 1, Lock: "y", Token: 14, At: at(600)},
	}
	ov := Overlaps(events)
	if len(ov) != 2 {
		t.Fatalf("overlaps %v, want 2", ov)
	}
	got := ov[0].String() + "; " + ov[1].String()
	for _, want := range []string{"client 2's hold 1 began before client 1's hold 1 ended", "client 4's hold 1 began before client 3's hold 1 ended"} {
		if !strings.Contains(got, want) {
			t.Errorf("overlaps %q lack %q", got, want)
		}
	}
	if len(Overlaps(events[:3])) != 0 {
		t.Error("a release followed by the next grant counted as an overlap")
	}
}

// In the resource's order: an old holder's write before the new holder's
// first lands legitimately; a second hold writing the same token lands
// stale, and so does a smaller token (a broken fence); refused writes count
// as rejected only.
func TestStaleLanded(t *testing.T) {
	events := []Event{
		{Kind: "write", C: 0, Hold: 1, Lock: "x", Token: 10, OK: true, At: at(0)},
		{Kind: "write", C: 1, Hold: 1, Lock: "x", Token: 11, OK: true, At: at(100)},
		{Kind: "write", C: 1, Hold: 1, Lock: "x", Token: 11, OK: true, At: at(110)}, // the same hold again
		{Kind: "write", C: 0, Hold: 1, Lock: "x", Token: 10, OK: false, At: at(120)},
		{Kind: "write", C: 5, Hold: 1, Lock: "y", Token: 10, OK: true, At: at(50)}, // another lock
	}
	if n := StaleLanded(events); n != 0 {
		t.Fatalf("healthy history: %d stale writes landed", n)
	}
	if n := StaleRejected(events); n != 1 {
		t.Errorf("stale rejected %d, want 1", n)
	}
	events = append(events,
		Event{Kind: "write", C: 2, Hold: 1, Lock: "x", Token: 11, OK: true, At: at(130)}, // token 11 granted twice
		Event{Kind: "write", C: 3, Hold: 4, Lock: "x", Token: 9, OK: true, At: at(140)},  // below the largest admitted
	)
	if n := StaleLanded(events); n != 2 {
		t.Errorf("stale landed %d, want 2", n)
	}
}

func TestIncreasing(t *testing.T) {
	gs := []Grant{{Lock: "a", Token: 1}, {Lock: "b", Token: 2}, {Lock: "a", Token: 5}}
	if err := Increasing(gs); err != nil {
		t.Fatal(err)
	}
	gs = append(gs, Grant{Lock: "c", Token: 5})
	if err := Increasing(gs); err == nil || !strings.Contains(err.Error(), "token 5, not above the one before it (5)") {
		t.Fatalf("equal tokens: %v", err)
	}
}

// A hold whose grant arrived after its ValidUntil (ended before it began)
// overlaps nothing, and nothing overlaps it.
func TestOverlapsEmptyHold(t *testing.T) {
	events := []Event{
		{Kind: "granted", C: 1, Hold: 1, Lock: "x", Token: 11, At: at(90)},
		{Kind: "granted", C: 0, Hold: 1, Lock: "x", Token: 10, At: at(100)},
		{Kind: "ended", C: 0, Hold: 1, Lock: "x", Token: 10, At: at(50)},
		{Kind: "ended", C: 1, Hold: 1, Lock: "x", Token: 11, At: at(200)},
	}
	if ov := Overlaps(events); len(ov) != 0 {
		t.Fatalf("overlaps %v", ov)
	}
}
