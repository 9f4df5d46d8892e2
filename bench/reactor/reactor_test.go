package reactor

import (
	"slices"
	"testing"
)

func TestTimerHeapOrder(t *testing.T) {
	var h timerHeap
	for _, at := range []int64{5, 3, 9, 1, 7, 3, 8} {
		h.push(timerEntry{at: at})
	}
	var got []int64
	for len(h) > 0 {
		got = append(got, h.pop().at)
	}
	if !slices.IsSorted(got) || len(got) != 7 {
		t.Fatalf("pops %v", got)
	}
}
