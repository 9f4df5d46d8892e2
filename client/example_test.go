package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/monolock/monolock/client"
	"github.com/monolock/monolock/eventloop"
	"github.com/monolock/monolock/protocol"
)

// startServer runs an in-process monolock server on a free loopback port for
// the examples; a real program points Config.Address at its server instead.
func startServer() (addr string, stop func()) {
	srv, err := eventloop.New(eventloop.Config{ListenAddress: "127.0.0.1:0", IOTimeout: 5 * time.Second, Logger: zerolog.Nop()})
	if err != nil {
		panic(err)
	}
	go func() { _ = srv.Serve() }()
	return srv.Addr().String(), func() { _ = srv.Shutdown(context.Background()) }
}

// Do runs a function while holding a lock; the token goes to the guarded
// resource as a fencing token.
func Example() {
	addr, stop := startServer()
	defer stop()

	c := client.New(client.Config{Address: addr})
	err := c.Do(context.Background(), "nightly-import", 2*time.Second,
		func(ctx context.Context, token uint64) error {
			// ctx is cancelled as soon as ownership is no longer confirmed.
			fmt.Println("importing with fencing token > 0:", token > 0)
			return nil
		})
	fmt.Println("released, err:", err)
	// Output:
	// importing with fencing token > 0: true
	// released, err: <nil>
}

// Invalid input fails before any connection is made, with the protocol
// package's errors.
func ExampleClient_Do_invalidName() {
	c := client.New(client.Config{Address: "127.0.0.1:7070"})
	err := c.Do(context.Background(), strings.Repeat("x", 300), time.Second,
		func(context.Context, uint64) error { return nil })
	fmt.Println(errors.Is(err, protocol.ErrNameTooLong))
	fmt.Println(err)
	// Output:
	// true
	// lock name too long: 300 bytes, the limit is 255
}

// DoRetry rides out server restarts and failed dials while waiting; the
// function still runs at most once.
func ExampleClient_DoRetry() {
	addr, stop := startServer()
	defer stop()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := client.New(client.Config{Address: addr})
	err := c.DoRetry(ctx, "deploy", 5*time.Second, func(ctx context.Context, token uint64) error {
		fmt.Println("deploying")
		return nil
	})
	fmt.Println("err:", err)
	// Output:
	// deploying
	// err: <nil>
}

// The lower-level handle: hold a lock across calls, watch for its loss, and
// release it with Close.
func ExampleClient_Acquire() {
	addr, stop := startServer()
	defer stop()

	c := client.New(client.Config{Address: addr})
	lock, err := c.Acquire(context.Background(), "leader", 2*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("leader, token > 0:", lock.Token() > 0)

	// Another process asking without waiting is told the lock is busy.
	_, err = c.TryAcquire(context.Background(), "leader", 2*time.Second)
	fmt.Println("second candidate:", err)

	select {
	case <-lock.Lost():
		fmt.Println("lost:", lock.Err())
	default:
		fmt.Println("still leading")
	}
	fmt.Println("close:", lock.Close())
	fmt.Println("after close:", lock.Err())
	// Output:
	// leader, token > 0: true
	// second candidate: monolock: lock is busy
	// still leading
	// close: <nil>
	// after close: monolock: lock released
}

// A server ERROR carries its code; branch on it with errors.Is and the
// protocol package's canonical errors, or on Retryable.
func ExampleServerError() {
	var err error = &client.ServerError{Code: protocol.CodeShuttingDown, Reason: "server shutting down"}

	var se *client.ServerError
	if errors.As(err, &se) {
		fmt.Println("retryable:", se.Retryable())
	}
	fmt.Println("shutting down:", errors.Is(err, protocol.ErrShuttingDown))
	fmt.Println(err)
	// Output:
	// retryable: true
	// shutting down: true
	// monolock: server error 0x01: server shutting down
}

// LockFromContext gives Do's function its Lock; Valid checks, without
// waiting for any goroutine, that ownership is still confirmed, right before
// each side effect.
func ExampleLockFromContext() {
	addr, stop := startServer()
	defer stop()

	c := client.New(client.Config{Address: addr})
	err := c.Do(context.Background(), "batch", 2*time.Second,
		func(ctx context.Context, token uint64) error {
			lock := client.LockFromContext(ctx)
			for i := range 3 {
				if !lock.Valid() {
					return context.Cause(ctx) // stop: ownership is not confirmed
				}
				fmt.Println("write", i, "with a token:", token > 0)
			}
			return nil
		})
	fmt.Println("err:", err)
	// Output:
	// write 0 with a token: true
	// write 1 with a token: true
	// write 2 with a token: true
	// err: <nil>
}
