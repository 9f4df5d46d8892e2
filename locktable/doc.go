// Package locktable is monolock's lock state machine: lock names mapped to a
// holder and a FIFO queue of waiters, plus the fencing-token sequence.
//
// It is deliberately pure. It opens no sockets, starts no goroutines, never
// reads the clock (the caller passes the wall-clock time in) and has no
// package-level mutable state. That keeps every transition deterministic, so
// the whole machine can be checked against a model in a property test, and it
// keeps the server's lease, I/O and admin logic out of the one place where a
// bug would mean two holders.
//
// A Table is owned by a single goroutine (the server's event loop); nothing
// in it is synchronised, so the hot path takes no mutex. Callers on other
// goroutines must hand their work to the owner.
//
// The server's connection is the lease, so the table has only two ways in
// and out: AcquireBytes when a session asks for a lock, and Release when the
// session goes away for any reason (close, lease expiry, kick, forced
// release). Release promotes the head of the queue, which is why the queue
// is FIFO and why removing a waiter from the middle must be O(1): when tens
// of thousands of waiters of one lock disconnect at once, the total cost has
// to stay linear.
package locktable
