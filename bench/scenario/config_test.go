package scenario

import (
	"slices"
	"testing"
	"time"
)

func TestCapSessions(t *testing.T) {
	got := capSessions([]int{1000, 16000, 19500, 8000, 19500, 30000}, 19500)
	if want := []int{1000, 8000, 16000, 19500}; !slices.Equal(got, want) {
		t.Fatalf("capSessions = %v, want %v", got, want)
	}
	if got := capSessions([]int{10000, 4001}, 4001); !slices.Equal(got, []int{4000}) {
		t.Fatalf("odd limits round down to an even count: %v", got)
	}
}

func TestSizesFitTheLimit(t *testing.T) {
	for _, sz := range []sizes{fullSizes(19500), quickSizes(19500), fullSizes(3000)} {
		for _, n := range append(append([]int{sz.s3Floor}, sz.s3Sessions...), sz.s5Queues...) {
			if n <= 0 || n%2 != 0 || n > 19500 {
				t.Fatalf("bad session count %d in %+v", n, sz)
			}
		}
		if sz.s4Reps < 1 || len(sz.s4Leases) == 0 || sz.s3Pairs < 1 {
			t.Fatalf("sizes %+v", sz)
		}
	}
	q := quickSizes(19500)
	if q.dur > time.Second || q.s3Sessions[len(q.s3Sessions)-1] > 2000 {
		t.Fatalf("quick sizes are not quick: %+v", q)
	}
}
