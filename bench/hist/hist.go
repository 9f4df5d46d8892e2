// Package hist is the harness's latency histogram: log-linear buckets,
// percentiles and a summary for the report.
package hist

import (
	"math"
	"math/bits"
	"time"
)

// Histogram records non-negative int64 values (nanoseconds, as a rule) in
// log-linear buckets, like an HDR histogram: values below 2·subCount are kept
// exactly, larger ones in buckets whose width is 1/subCount of their power of
// two, so any reported percentile is within 1/(2·subCount) (0.4 %) of a value
// that was recorded. Count, min, max and the sum are exact. The zero value is
// ready to use; Record does not allocate after the first call.
type Histogram struct {
	counts []uint64
	n      uint64
	sum    float64
	min    int64
	max    int64
}

const (
	subBits  = 7
	subCount = 1 << subBits // sub-buckets per power of two
	// numBuckets covers every non-negative int64.
	numBuckets = (63-subBits)*subCount + 2*subCount
)

// bucketOf returns the bucket index of v ≥ 0.
func bucketOf(v int64) int {
	u := uint64(v)
	m := bits.Len64(u)
	if m <= subBits+1 {
		return int(u)
	}
	shift := m - (subBits + 1)
	return shift*subCount + int(u>>uint(shift))
}

// bucketBounds returns the smallest and largest value bucket i holds.
func bucketBounds(i int) (lo, hi int64) {
	if i < 2*subCount {
		return int64(i), int64(i)
	}
	shift := i/subCount - 1
	sub := int64(i%subCount + subCount)
	lo = sub << uint(shift)
	hi = (sub+1)<<uint(shift) - 1
	return lo, hi
}

// Record adds one value; negative values count as zero.
func (h *Histogram) Record(v int64) {
	if v < 0 {
		v = 0
	}
	if h.counts == nil {
		h.counts = make([]uint64, numBuckets)
	}
	h.counts[bucketOf(v)]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.n++
	h.sum += float64(v)
}

// RecordDuration adds one duration.
func (h *Histogram) RecordDuration(d time.Duration) { h.Record(int64(d)) }

// Merge adds every value of o.
func (h *Histogram) Merge(o *Histogram) {
	if o == nil || o.n == 0 {
		return
	}
	if h.counts == nil {
		h.counts = make([]uint64, numBuckets)
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	if o.max > h.max {
		h.max = o.max
	}
	h.n += o.n
	h.sum += o.sum
}

// Count is the number of recorded values.
func (h *Histogram) Count() uint64 { return h.n }

// Min is the smallest recorded value (0 when empty).
func (h *Histogram) Min() int64 { return h.min }

// Max is the largest recorded value (0 when empty).
func (h *Histogram) Max() int64 { return h.max }

// Mean is the exact average (0 when empty).
func (h *Histogram) Mean() float64 {
	if h.n == 0 {
		return 0
	}
	return h.sum / float64(h.n)
}

// Percentile returns the value at percentile p in [0, 100] by the nearest-rank
// method: the smallest recorded value v such that at least p % of the values
// are ≤ v, reported as the middle of v's bucket and clamped to [min, max].
// It returns 0 for an empty histogram.
func (h *Histogram) Percentile(p float64) int64 {
	if h.n == 0 {
		return 0
	}
	switch {
	case p <= 0:
		return h.min
	case p >= 100:
		return h.max
	}
	rank := uint64(math.Ceil(p / 100 * float64(h.n)))
	rank = max(rank, 1)
	var seen uint64
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		seen += c
		if seen >= rank {
			lo, hi := bucketBounds(i)
			mid := lo + (hi-lo)/2
			return min(max(mid, h.min), h.max)
		}
	}
	return h.max
}

// Summary is the usual set of figures of a latency distribution.
type Summary struct {
	N    uint64  `json:"n"`
	Min  int64   `json:"min_ns"`
	Mean float64 `json:"mean_ns"`
	P50  int64   `json:"p50_ns"`
	P90  int64   `json:"p90_ns"`
	P99  int64   `json:"p99_ns"`
	P999 int64   `json:"p999_ns"`
	Max  int64   `json:"max_ns"`
}

// Summarize returns the histogram's summary.
func (h *Histogram) Summarize() Summary {
	return Summary{
		N: h.n, Min: h.min, Mean: h.Mean(),
		P50: h.Percentile(50), P90: h.Percentile(90), P99: h.Percentile(99), P999: h.Percentile(99.9),
		Max: h.max,
	}
}
