package charts

import "testing"

func TestCompactNumber(t *testing.T) {
	cases := map[float64]string{0.01: "0.01", 1: "1", 100: "100", 10_000: "10k", 1e6: "1M"}
	for v, want := range cases {
		if got := compactNumber(v); got != want {
			t.Errorf("compactNumber(%v) = %q, want %q", v, got, want)
		}
	}
}
