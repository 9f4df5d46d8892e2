package main

import (
	"testing"
	"time"

	"github.com/monolock/monolock/internal/testsupport/fenced"
)

// TestResourceFenceAndHandover: the fence rejects a smaller token, and the
// hand-over sees an overlap exactly when an old write arrives after the next
// holder's first.
func TestResourceFenceAndHandover(t *testing.T) {
	base := time.Date(2038, 1, 19, 3, 14, 8, 0, time.UTC)
	arrivals := 0
	r, err := startResource(fenced.Options{Now: func() time.Time { arrivals++; return base.Add(time.Duration(arrivals) * time.Millisecond) }})
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()

	if !r.record("a", "old", 5) || !r.record("a", "next", 6) {
		t.Fatal("increasing tokens rejected")
	}
	if r.record("a", "old", 5) {
		t.Fatal("a smaller token than the largest accepted was accepted")
	}
	if n := r.staleAttempts("a"); n != 1 {
		t.Fatalf("%d stale attempts on a; want 1", n)
	}
	if n := r.staleAccepted("a"); n != 0 {
		t.Fatalf("%d stale writes accepted on a; want 0", n)
	}
	h, err := r.handover("a", "old", "next")
	if err != nil {
		t.Fatal(err)
	}
	if h.overlap != time.Millisecond || h.oldAfter != 1 || h.staleAccepted != 0 || h.oldWrites != 2 || h.nextWrites != 1 {
		t.Fatalf("handover %+v; want an overlap, one old write after, none accepted", h)
	}

	r.record("b", "old", 7)
	r.record("b", "next", 8) // a millisecond later on the injected clock
	h, err = r.handover("b", "old", "next")
	if err != nil {
		t.Fatal(err)
	}
	if h.overlap != 0 || h.gap != time.Millisecond || h.oldAfter != 0 {
		t.Fatalf("handover %+v; want a gap and no overlap", h)
	}
	if _, err := r.handover("c", "old", "next"); err == nil {
		t.Fatal("a round without writes is not an error")
	}
}
