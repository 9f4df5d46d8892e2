package fence_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/monolock/monolock/fence"
)

// unsignedSteps are admits in order and whether each is admitted, for every
// Fence: 0 never, equal again, and 2^63 − 1 < 2^63 < 2^64 − 1.
var unsignedSteps = []struct {
	token uint64
	ok    bool
}{
	{0, false},             // never issued
	{math.MaxInt64, true},  // 2^63 − 1
	{math.MaxInt64, true},  // the same holder writes again
	{1 << 63, true},        // 2^63: larger, though negative as int64
	{math.MaxInt64, false}, // the older holder after the newer
	{math.MaxUint64, true}, // 2^64 − 1
	{1 << 63, false},       // stale again
	{math.MaxUint64, true}, // equal is admitted
}

func TestMemoryOrdersTokensAsUnsigned(t *testing.T) {
	ctx := context.Background()
	var m fence.Memory
	for i, s := range unsignedSteps {
		err := m.Admit(ctx, "r", s.token)
		if s.ok && err != nil {
			t.Fatalf("step %d: Admit(%d) = %v, want admitted", i, s.token, err)
		}
		if !s.ok && !errors.Is(err, fence.ErrStale) {
			t.Fatalf("step %d: Admit(%d) = %v, want ErrStale", i, s.token, err)
		}
	}
	if got := m.Highest("r"); got != math.MaxUint64 {
		t.Fatalf("Highest = %d, want %d", got, uint64(math.MaxUint64))
	}
	if err := m.Admit(ctx, "other", 5); err != nil {
		t.Fatalf("resources are independent: %v", err)
	}
}

func TestStaleErrorSaysWhatToDo(t *testing.T) {
	var m fence.Memory
	_ = m.Admit(context.Background(), "r", 10)
	err := m.Admit(context.Background(), "r", 9)
	var se *fence.StaleError
	if !errors.As(err, &se) || se.Token != 9 || se.Highest != 10 {
		t.Fatalf("err = %#v, want a *StaleError for 9 below 10", err)
	}
	if msg := err.Error(); msg != `fence: stale token 9 for "r": token 10 was admitted, so the lock was handed on; stop the work and take the lock again` {
		t.Fatalf("message = %q", msg)
	}
}
