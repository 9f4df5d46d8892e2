package locktable

import (
	"testing"
	"unsafe"
)

// TestSizes pins the per-lock and per-claim footprint: one lock per held lock
// and one Claim per session, tens of thousands of each. T is a pointer, as in
// the event loop.
func TestSizes(t *testing.T) {
	type session struct{}
	if got := unsafe.Sizeof(lock[*session]{}); got != 48 {
		t.Errorf("lock is %d bytes, want 48", got)
	}
	if got := unsafe.Sizeof(Claim[*session]{}); got != 48 {
		t.Errorf("Claim is %d bytes, want 48", got)
	}
}
