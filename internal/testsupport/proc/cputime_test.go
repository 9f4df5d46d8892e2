package proc

import (
	"os"
	"testing"
)

// TestCPUTime: the process's own CPU time grows as it computes, and a
// process that does not exist is an error.
func TestCPUTime(t *testing.T) {
	before, err := CPUTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for {
		x := 0
		for i := range 10_000_000 {
			x ^= i
		}
		_ = x
		after, err := CPUTime(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if after > before {
			break
		}
	}
	if _, err := CPUTime(1 << 30); err == nil {
		t.Error("the CPU time of pid 2^30 was read")
	}
}
