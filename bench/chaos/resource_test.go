package main

import (
	"testing"
	"time"

	"github.com/monolock/monolock/internal/testsupport/fenced"
)

func TestResourceFencing(t *testing.T) {
	r := NewResource()
	steps := []struct {
		lock  string
		token uint64
		want  bool
	}{
		{"a", 5, true},
		{"a", 5, true},  // the same holder again
		{"a", 4, false}, // stale
		{"b", 1, true},  // locks are independent
		{"a", 7, true},
		{"a", 5, false},
		{"a", 0, false}, // 0 is never a grant
		{"b", 0, false},
		{"b", 2, true},
	}
	for i, s := range steps {
		if got := r.Write(s.lock, s.token, 1, i, true, time.Time{}); got != s.want {
			t.Fatalf("step %d: Write(%q, %d) = %v, want %v", i, s.lock, s.token, got, s.want)
		}
	}
	ws := r.Writes()
	if len(ws) != len(steps) {
		t.Fatalf("%d writes recorded, want %d", len(ws), len(steps))
	}
	for i, w := range ws {
		if w.Seq != i || w.Accepted != steps[i].want || w.Token != steps[i].token || w.Grant != i {
			t.Fatalf("write %d recorded as %+v", i, w)
		}
		if i > 0 && w.At.Before(ws[i-1].At) {
			t.Fatalf("write %d is stamped before write %d", i, i-1)
		}
	}
	if ws[2].Highest != 5 || ws[5].Highest != 7 {
		t.Fatalf("Highest before the stale writes: %d, %d; want 5, 7", ws[2].Highest, ws[5].Highest)
	}
	if acc, rej := r.Counts(); acc != 5 || rej != 4 {
		t.Fatalf("Counts = %d, %d; want 5, 4", acc, rej)
	}
	// The checker agrees with the resource on which writes were stale.
	rep := Report{}
	checkWrites(&rep, ws, map[lockToken]*hold{}, 0)
	if rep.Count(checkStale) != 0 || rep.StaleRejected != 4 {
		t.Fatalf("check b on the resource's own history: %d violations, %d stale rejected; want 0, 4: %v",
			rep.Count(checkStale), rep.StaleRejected, rep.Violations)
	}
}

func TestResourceClock(t *testing.T) {
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	r := newResource(fenced.Options{Now: func() time.Time { return base }})
	r.Write("l", 1, 1, 1, false, time.Time{})
	w := r.Writes()[0]
	if !w.At.Equal(base) || w.Believed {
		t.Fatalf("write recorded as %+v", w)
	}
}
