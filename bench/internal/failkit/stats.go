package failkit

import (
	"fmt"
	"slices"
	"time"
)

// Seconds formats a duration for a table: "1.23 s".
func Seconds(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// Median is the middle value (the upper of the two middles); 0 for none.
func Median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// MaxOf is the largest value; 0 for none.
func MaxOf(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

// MinOf is the smallest value; 0 for none.
func MinOf(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return slices.Min(ds)
}
