package client

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestLockHandle(t *testing.T) {
	addr := startServer(t)
	ctx := testContext(t)
	holder, err := New(Config{Address: addr}).Acquire(ctx, "handle", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if holder.Token() == 0 || holder.Err() != nil || holder.Name() != "handle" {
		t.Fatalf("token %d, err %v, name %q", holder.Token(), holder.Err(), holder.Name())
	}

	waiter, err := New(Config{Address: addr}).Enqueue(ctx, "handle", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close()
	select {
	case <-waiter.Granted():
		t.Fatal("granted while the lock is held")
	default:
	}
	if waiter.Token() != 0 {
		t.Fatalf("token %d before the grant", waiter.Token())
	}

	if _, err := New(Config{Address: addr}).TryAcquire(ctx, "handle", 10*time.Second); !errors.Is(err, ErrBusy) {
		t.Fatalf("TryAcquire on a held lock = %v, want ErrBusy", err)
	}

	// Close is the release; concurrent and repeated Closes are fine.
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if err := holder.Close(); err != nil {
				t.Errorf("Close = %v", err)
			}
		})
	}
	wg.Wait()
	await(t, holder.Lost(), "Lost after Close")
	if !errors.Is(holder.Err(), ErrReleased) || !errors.Is(context.Cause(holder.Context()), ErrReleased) {
		t.Fatalf("Err = %v after Close, want ErrReleased", holder.Err())
	}

	await(t, waiter.Granted(), "promotion")
	if waiter.Token() <= holder.Token() {
		t.Fatalf("tokens %d then %d; want increasing", holder.Token(), waiter.Token())
	}
}

func TestTryAcquireFreeLock(t *testing.T) {
	l, err := New(Config{Address: startServer(t)}).TryAcquire(testContext(t), "free", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestAcquireCancelledWhileQueued(t *testing.T) {
	addr := startServer(t)
	holder, err := New(Config{Address: addr}).Acquire(testContext(t), "queued", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	ctx, cancel := context.WithTimeout(testContext(t), 100*time.Millisecond)
	defer cancel()
	if _, err := New(Config{Address: addr}).Acquire(ctx, "queued", 10*time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire = %v, want the deadline", err)
	}
}
