package locktable

import "iter"

// The read-only views below serve the event loop (answering a heartbeat,
// forced release by name) and the admin API and metrics. None of them
// allocates per element, and the counters are O(1) so a metrics scrape never
// walks the table.

// Holder returns the holder of name, or nil when the lock is idle (unknown).
// In block mode it may be Pending: the lock is its, the token still to come.
func (t *Table[T]) Holder(name string) *Claim[T] {
	if lk := t.locks[name]; lk != nil {
		return lk.holder
	}
	return nil
}

// Waiters yields the waiters of name in FIFO order (nothing for an idle
// lock). The loop body may Release the claim it was just given (for example
// to kick every waiter); releasing any other claim of the same lock during
// the iteration is not supported.
func (t *Table[T]) Waiters(name string) iter.Seq[*Claim[T]] {
	return func(yield func(*Claim[T]) bool) {
		lk := t.locks[name]
		if lk == nil {
			return
		}
		for c := lk.q.head; c != nil; {
			next := c.next // read first: yield may Release c
			if !yield(c) {
				return
			}
			c = next
		}
	}
}

// Locks yields every lock that has a holder or waiters: name and holder.
// Order unspecified. As with a map range, the loop body may Release claims;
// a lock forgotten before it is reached is not yielded.
func (t *Table[T]) Locks() iter.Seq2[string, *Claim[T]] {
	return func(yield func(string, *Claim[T]) bool) {
		for name, lk := range t.locks {
			if !yield(name, lk.holder) {
				return
			}
		}
	}
}

// Held returns the number of held locks: the live locks (a live lock
// always has a holder) but those whose holder is Pending.
func (t *Table[T]) Held() int { return len(t.locks) - t.pending.len }

// Waiting returns the number of waiters over all locks, Pending claims
// included.
func (t *Table[T]) Waiting() int { return t.waiting }

// LastToken returns the last token issued (0 before the first grant).
func (t *Table[T]) LastToken() uint64 { return t.last }

// NextWaiter returns the waiter queued right behind c on the same lock, or
// nil when c is the last waiter or is not waiting. With it a long queue can
// be read a piece at a time, resuming after the last claim read.
func (c *Claim[T]) NextWaiter() *Claim[T] {
	if c.state != Waiting {
		return nil
	}
	return c.next
}
