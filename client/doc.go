// Package client is the Go client for monolock, a lock service in which one TCP
// connection is one claim on one named lock and closing the connection releases it.
//
// Most programs need one call:
//
//	c := client.New(client.Config{Address: "127.0.0.1:7070"})
//	err := c.Do(ctx, "nightly-import", 2*time.Second,
//		func(ctx context.Context, token uint64) error {
//			// ctx is cancelled as soon as ownership is no longer confirmed;
//			// check Valid before each side effect, and pass token to the
//			// guarded resource as a fencing token.
//			if !client.LockFromContext(ctx).Valid() {
//				return context.Cause(ctx)
//			}
//			return work(ctx, token)
//		})
//
// Do waits in the lock's FIFO queue, runs the function while the server keeps
// confirming ownership and releases the lock when the function returns or panics.
// DoRetry adds reconnection with backoff for transient failures. Enqueue, Acquire,
// AcquireWithin (a bounded wait) and TryAcquire return a *Lock handle for
// callers that manage the hold themselves.
//
// Config.Addrs (or a host name with several addresses) gives the client a
// primary and its standbys: each attempt starts from the address that last
// worked and passes over one that refuses the connection, within the same
// connect timeout.
//
// The client follows monolock's client rules (numbered in docs/protocol.md,
// "Writing a client in another language"): one permanent reader per
// connection; heartbeats on a schedule derived from the lease (lease/4, shortened
// by twice the smoothed round-trip time, at most one in flight); every WAITING or
// ACQUIRED frame counts as the acknowledgement. Ownership counts as lost when
// 0.8 × lease has passed since the send of the newest acknowledged request (which
// is at least 0.2 × lease before the server may hand the lock on), on any ERROR,
// on end of stream, on a failed write and on any frame that does not fit the
// protocol. A lost lock is never re-acquired silently: a new attempt is a new
// connection at the back of the queue.
//
// # Losing the lock
//
// A loss stops the work at once: Valid turns false, Do's function context is
// cancelled on the goroutine that found the loss before it does anything else,
// then Lost is closed. Lock.Valid compares the monotonic clock with the
// deadline itself, so a process resuming from a pause sees the loss at its
// next check without waiting for any goroutine.
//
// Closing the connection is the release, and the server hands the lock to the
// next waiter the moment it sees the close. So when the client gives up on its
// own (silence, a frame that breaks the protocol) it stops heartbeating but
// keeps the connection open until the work has stopped (Do's function returned,
// or Close was called) or the lease has passed since its last send, whichever
// comes first: the server's expiry, not the client's close, hands the lock on
// while the old work may still run. After an ERROR or the server's close the
// server has let go already, and the connection is closed at once.
//
// None of this stops a process that pauses between its check and its write;
// fencing tokens do: the resource rejects writes with a token smaller than the
// largest it has seen.
//
// # Slow links
//
// With one heartbeat in flight a lock can be held only while the round-trip
// time stays below 0.4 × lease: the answer to a heartbeat sent at t arrives at
// t + RTT, the next heartbeat goes out then and is answered at t + 2 × RTT,
// which must come before the deadline t + 0.8 × lease. Choose a lease of at
// least 2.5 × the worst round-trip time.
//
// # Schedulers
//
// For gocron, module github.com/monolock/monolock/integrations/gocronlock
// has a Locker (each run of a job on one scheduler of the fleet) and an
// Elector (only the leader's scheduler runs jobs) built on this package;
// docs/integrations.md in the repository shows them.
package client
