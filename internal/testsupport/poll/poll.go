// Package poll waits for a condition that has no event to await: another
// process's state read over its API, a file another goroutine writes. It
// replaces the deadline-and-sleep loops the tests and harnesses wrote by
// hand, each with its own interval and its own message.
//
// A condition is a func that returns nil once it holds, or an error that
// says what is not true yet; on the deadline that last error is the message.
// Where an event can be awaited (a channel, a line from a process), await it
// instead: polling is for what cannot say when it changes. Sleep is the
// pause of a loop that must end with its context.
package poll

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// The interval between two calls starts short, so a condition that holds
// soon costs little, and doubles up to maxInterval, so a long wait does not
// spin on a shared machine.
const (
	firstInterval = time.Millisecond
	maxInterval   = 20 * time.Millisecond
)

// Until calls cond until it returns nil and returns nil, or until within has
// passed and returns an error with cond's last answer. A cond that returns
// an error made by Abort ends the wait at once with that error.
func Until(within time.Duration, cond func() error) error {
	deadline := time.Now().Add(within)
	interval := firstInterval
	for {
		err := cond()
		if err == nil {
			return nil
		}
		var ab *abort
		if errors.As(err, &ab) {
			return ab.err
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("not within %v: %w", within, err)
		}
		time.Sleep(min(interval, time.Until(deadline)))
		interval = min(2*interval, maxInterval)
	}
}

// Eventually is Until for a test: when cond does not hold within the
// deadline, the test fails with cond's last answer.
func Eventually(t testing.TB, within time.Duration, cond func() error) {
	t.Helper()
	if err := Until(within, cond); err != nil {
		t.Fatal(err)
	}
}

// Abort wraps err so that Until returns it at once: the condition can no
// longer come true (the process it waits on has exited).
func Abort(err error) error { return &abort{err} }

type abort struct{ err error }

func (a *abort) Error() string { return a.err.Error() }
func (a *abort) Unwrap() error { return a.err }
