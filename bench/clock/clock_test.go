package clock

import "testing"

func TestWindow(t *testing.T) {
	w := Window{From: 100, Until: 200}
	if !w.Has(100) || w.Has(200) || w.Has(99) || w.Seconds() != 1e-7 {
		t.Fatal("window bounds")
	}
}
