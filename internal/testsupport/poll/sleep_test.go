package poll_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/monolock/monolock/internal/testsupport/poll"
)

func TestSleepEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan error, 1)
	go func() { ended <- poll.Sleep(ctx, time.Hour) }()
	cancel()
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep of an hour, its context canceled: %v, want context.Canceled", err)
	}
}

func TestSleepOfAnEndedContextReturnsAtOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := poll.Sleep(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep(ended, 0): %v, want context.Canceled", err)
	}
}

func TestSleepToTheEnd(t *testing.T) {
	if err := poll.Sleep(context.Background(), time.Microsecond); err != nil {
		t.Fatalf("Sleep of a live context: %v, want nil", err)
	}
	if err := poll.Sleep(context.Background(), -time.Second); err != nil {
		t.Fatalf("Sleep of a negative duration: %v, want nil", err)
	}
}
