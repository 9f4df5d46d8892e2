package fdbudget_test

import (
	"math"
	"testing"

	"github.com/monolock/monolock/internal/testsupport/fdbudget"
)

func TestRoom(t *testing.T) {
	cases := []struct {
		limit                 uint64
		want, perConn, margin int
		room                  int
	}{
		{1024, 100, 2, 256, 100},                 // fits
		{1024, 1000, 2, 256, 384},                // (1024 − 256) / 2
		{1024, 1000, 1, 2048, 0},                 // the margin alone is over the limit
		{1024, 1000, 1, 1024, 0},                 // nothing left
		{math.MaxUint64, 10_000, 1, 200, 10_000}, // RLIM_INFINITY
		{1024, 10, 0, 0, 0},                      // a nonsense cost fits nothing
	}
	for _, c := range cases {
		if got := fdbudget.Room(c.limit, c.want, c.perConn, c.margin); got != c.room {
			t.Errorf("Room(%d, %d, %d, %d) = %d, want %d", c.limit, c.want, c.perConn, c.margin, got, c.room)
		}
	}
}

// The process's own limits: soft ≤ hard, RaiseSoft lifts soft to hard, and
// Fit agrees with Room under the soft limit.
func TestLimits(t *testing.T) {
	soft, hard, err := fdbudget.RaiseSoft()
	if err != nil {
		t.Fatal(err)
	}
	if soft != hard {
		t.Fatalf("after RaiseSoft: soft %d, hard %d", soft, hard)
	}
	if s, h, err := fdbudget.Limits(); err != nil || s != soft || h != hard {
		t.Fatalf("Limits = %d, %d, %v; want %d, %d", s, h, err, soft, hard)
	}
	n, err := fdbudget.Fit(1<<30, 2, 100)
	if err != nil || n != fdbudget.Room(soft, 1<<30, 2, 100) {
		t.Fatalf("Fit = %d, %v; want Room under the soft limit %d", n, err, soft)
	}
}
