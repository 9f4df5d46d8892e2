// Package client is the Go client for monolock, a lock service in which one TCP
// connection is one claim on one named lock and closing the connection releases it.
//
// Most programs need one call:
//
//	c := client.New(client.Config{Address: "127.0.0.1:7070"})
//	err := c.Do(ctx, "nightly-import", 2*time.Second,
//		func(ctx context.Context, token uint64) error {
//			// ctx is cancelled the moment ownership is no longer confirmed;
//			// pass token to the guarded resource as a fencing token.
//			return work(ctx, token)
//		})
//
// Do waits in the lock's FIFO queue, runs the function while the server keeps
// confirming ownership and releases the lock when the function returns or panics.
// DoRetry adds reconnection with backoff for transient failures. Enqueue, Acquire
// and TryAcquire return a *Lock handle for callers that manage the hold
// themselves.
//
// The client follows monolock's client rules (numbered in docs/protocol.md,
// "Writing a client in another language"): one permanent reader per
// connection; heartbeats on a schedule derived from the lease (lease/4, shortened
// by twice the smoothed round-trip time, at most one in flight); every WAITING or
// ACQUIRED frame counts as the acknowledgement; ownership counts as lost, and the
// connection is closed, when no acknowledgement arrives within 0.8 × lease (which
// is before the server may hand the lock on), on any ERROR, on end of stream, on
// a failed write and on any frame that does not fit the protocol. A lost lock is
// never re-acquired silently: a new attempt is a new connection at the back of
// the queue.
package client
