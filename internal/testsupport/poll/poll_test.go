package poll_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/monolock/monolock/internal/testsupport/poll"
)

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	calls := 0
	err := poll.Until(time.Minute, func() error {
		calls++
		if calls < 4 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || calls != 4 {
		t.Fatalf("Until = %v after %d calls, want nil after 4", err, calls)
	}
}

// A condition that never holds: the error names the deadline and the
// condition's last answer, and the wait ends (a stuck counterpart).
func TestUntilGivesUpWithTheLastAnswer(t *testing.T) {
	calls := 0
	err := poll.Until(30*time.Millisecond, func() error {
		calls++
		return errors.New("3 waiters, want 4")
	})
	if err == nil || !strings.Contains(err.Error(), "not within 30ms: 3 waiters, want 4") {
		t.Fatalf("Until = %v, want the deadline and the last answer", err)
	}
	if calls < 2 {
		t.Fatalf("cond called %d times, want it polled", calls)
	}
}

// A condition that can no longer come true (the process died) ends the
// wait at once, with its own error.
func TestAbortEndsTheWait(t *testing.T) {
	dead := errors.New("the server exited")
	calls := 0
	err := poll.Until(time.Hour, func() error {
		calls++
		return poll.Abort(dead)
	})
	if err != dead || calls != 1 {
		t.Fatalf("Until = %v after %d calls, want the abort's error after 1", err, calls)
	}
}

type recordingTB struct {
	testing.TB
	failed string
}

func (r *recordingTB) Helper()           {}
func (r *recordingTB) Fatal(args ...any) { r.failed = args[0].(error).Error() }

func TestEventuallyFailsTheTest(t *testing.T) {
	rec := &recordingTB{TB: t}
	poll.Eventually(rec, 0, func() error { return errors.New("file has 2 lines, want 3") })
	if rec.failed != "not within 0s: file has 2 lines, want 3" {
		t.Fatalf("failed with %q", rec.failed)
	}
	rec.failed = ""
	poll.Eventually(rec, 0, func() error { return nil })
	if rec.failed != "" {
		t.Fatalf("a condition that holds failed the test: %q", rec.failed)
	}
}
