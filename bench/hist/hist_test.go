package hist

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestBucketBoundsCoverEveryValue(t *testing.T) {
	prevHi := int64(-1)
	for i := 0; i < numBuckets; i++ {
		lo, hi := bucketBounds(i)
		if lo != prevHi+1 {
			t.Fatalf("bucket %d starts at %d, want %d", i, lo, prevHi+1)
		}
		if hi < lo {
			t.Fatalf("bucket %d: hi %d < lo %d", i, hi, lo)
		}
		if bucketOf(lo) != i || bucketOf(hi) != i {
			t.Fatalf("bucket %d [%d, %d]: bucketOf gives %d and %d", i, lo, hi, bucketOf(lo), bucketOf(hi))
		}
		prevHi = hi
		if hi == math.MaxInt64 {
			return
		}
	}
	t.Fatalf("buckets end at %d, before MaxInt64", prevHi)
}

func TestBucketRelativeWidth(t *testing.T) {
	for i := 2 * subCount; i < numBuckets; i++ {
		lo, hi := bucketBounds(i)
		if w := float64(hi-lo+1) / float64(lo); w > 1.0/subCount+1e-12 {
			t.Fatalf("bucket %d [%d, %d] is %.4f of its value", i, lo, hi, w)
		}
		if hi == math.MaxInt64 {
			break
		}
	}
}

func TestPercentileSmallValuesExact(t *testing.T) {
	var h Histogram
	for v := int64(1); v <= 100; v++ {
		h.Record(v)
	}
	cases := map[float64]int64{0: 1, 1: 1, 50: 50, 90: 90, 99: 99, 99.5: 100, 100: 100}
	for p, want := range cases {
		if got := h.Percentile(p); got != want {
			t.Errorf("p%v = %d, want %d", p, got, want)
		}
	}
	if h.Count() != 100 || h.Min() != 1 || h.Max() != 100 || h.Mean() != 50.5 {
		t.Errorf("count %d min %d max %d mean %v", h.Count(), h.Min(), h.Max(), h.Mean())
	}
}

// nearestRank is the exact percentile the histogram approximates.
func nearestRank(sorted []int64, p float64) int64 {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = max(rank, 1)
	return sorted[rank-1]
}

func TestPercentileWithinRelativeError(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 7, 1000, 100_000} {
		var h Histogram
		vs := make([]int64, n)
		for i := range vs {
			// log-uniform from 1 ns to 10 s
			vs[i] = int64(math.Exp(rng.Float64() * math.Log(1e10)))
			h.Record(vs[i])
		}
		slices.Sort(vs)
		for _, p := range []float64{0, 10, 50, 90, 99, 99.9, 100} {
			want := nearestRank(vs, p)
			got := h.Percentile(p)
			if rel := math.Abs(float64(got-want)) / float64(want); rel > 1.0/(2*subCount)+1e-9 && got-want != 0 {
				t.Errorf("n=%d p%v: got %d, exact %d (rel error %.5f)", n, p, got, want, rel)
			}
		}
	}
}

func TestHistogramEmptyAndNegative(t *testing.T) {
	var h Histogram
	if h.Percentile(50) != 0 || h.Mean() != 0 || h.Count() != 0 {
		t.Fatal("empty histogram must report zeros")
	}
	h.Record(-5)
	if h.Min() != 0 || h.Max() != 0 || h.Count() != 1 {
		t.Fatalf("negative values count as zero: min %d max %d", h.Min(), h.Max())
	}
}

func TestHistogramMerge(t *testing.T) {
	var a, b, all Histogram
	for v := int64(0); v < 5000; v += 3 {
		a.Record(v * 1000)
		all.Record(v * 1000)
	}
	for v := int64(1); v < 9000; v += 7 {
		b.Record(v * 999)
		all.Record(v * 999)
	}
	a.Merge(&b)
	a.Merge(nil)
	a.Merge(&Histogram{})
	if a.Summarize() != all.Summarize() {
		t.Fatalf("merged %+v, recorded together %+v", a.Summarize(), all.Summarize())
	}
}
