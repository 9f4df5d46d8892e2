package scenario

import "testing"

// A second counts as stalled when under a tenth of the fastest; the last,
// partial one is left out.
func TestStalledSeconds(t *testing.T) {
	if n := stalledSeconds([]uint64{12000, 11000, 500, 0, 0, 12000, 3}); n != 3 {
		t.Errorf("stalledSeconds = %d, want 3", n)
	}
	if n := stalledSeconds([]uint64{5}); n != 0 {
		t.Errorf("one second: %d, want 0", n)
	}
}
