package locktable

import "time"

// The test-only surface of the table: conveniences the tests and the model
// use, kept out of the API the event loop programs against.

// Acquire is AcquireBytes for a name the test already has as a string.
func (t *Table[T]) Acquire(c *Claim[T], name string, now time.Time) (granted bool) {
	return t.acquire(c, t.locks[name], name, nil, now)
}

// Len returns the number of live locks.
func (t *Table[T]) Len() int { return len(t.locks) }

// QueueLen returns the number of waiters on name.
func (t *Table[T]) QueueLen(name string) int {
	if lk := t.locks[name]; lk != nil {
		return lk.q.len
	}
	return 0
}

// SetLastToken raises the floor for the next token (never lowers it), so a
// test can start the sequence anywhere. A non-zero floor counts as a token
// already issued: the next grant is max(floor+1, unixSeconds(now)<<32) and
// does not skip ahead a second as a fresh table's first grant does.
func (t *Table[T]) SetLastToken(tok uint64) {
	if tok > t.last {
		t.last = tok
	}
}
