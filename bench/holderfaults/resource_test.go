package main

import (
	"testing"
	"time"
)

// TestResourceFenceAndHandover: the fence rejects a smaller token, and the
// hand-over sees an overlap exactly when an old write arrives after the next
// holder's first.
func TestResourceFenceAndHandover(t *testing.T) {
	r, err := startResource()
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
	h, err := r.handover("a", "old", "next")
	if err != nil {
		t.Fatal(err)
	}
	if h.overlap <= 0 || h.oldAfter != 1 || h.staleAccepted != 0 || h.oldWrites != 2 || h.nextWrites != 1 {
		t.Fatalf("handover %+v; want an overlap, one old write after, none accepted", h)
	}

	r.record("b", "old", 7)
	time.Sleep(time.Millisecond) // two arrivals with distinct times
	r.record("b", "next", 8)
	h, err = r.handover("b", "old", "next")
	if err != nil {
		t.Fatal(err)
	}
	if h.overlap != 0 || h.gap <= 0 || h.oldAfter != 0 {
		t.Fatalf("handover %+v; want a gap and no overlap", h)
	}
	if _, err := r.handover("c", "old", "next"); err == nil {
		t.Fatal("a round without writes is not an error")
	}
}
