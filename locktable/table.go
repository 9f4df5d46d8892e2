package locktable

import "time"

// Table maps lock names to their holder and FIFO queue of waiters, and issues
// fencing tokens from one sequence shared by all locks. T is the type of the
// claims' Value. It is not safe for concurrent use: one goroutine owns it.
// The zero value is not usable; call New.
type Table[T any] struct {
	locks   map[string]*lock[T] // live locks only (those with a holder)
	waiting int                 // waiters over all locks, kept so Waiting is O(1)
	last    uint64              // last token issued; 0: next grant is the first
	free    []*lock[T]          // recycled lock structs, see maxFree

	// Block mode (blocks.go); blocks is nil for tokens from the clock.
	blocks   *blockSource
	mayIssue func(*Claim[T]) bool // nil: every claim may be issued a token
	pending  queue[T]             // Pending claims, in the order they began to wait
}

// New returns an empty table for claims whose Value is a T. Its first grant
// takes its token from the clock, one second ahead (see NextToken).
func New[T any]() *Table[T] {
	return &Table[T]{locks: make(map[string]*lock[T])}
}

// AcquireBytes puts an Idle claim on the lock named by name, a slice of a
// read buffer: the holder (with a fresh token) if the lock is free, else at
// the back of its FIFO queue. now is the wall clock, read by the caller, used
// only for the token. It reports whether c was granted. AcquireBytes on a
// claim that is not Idle panics (programming error).
//
// A string of the name is made only when the lock is new and kept as the map
// key, so a waiter, which shares the holder's copy, costs no allocation.
func (t *Table[T]) AcquireBytes(c *Claim[T], name []byte, now time.Time) (granted bool) {
	return t.acquire(c, t.locks[string(name)], "", name, now)
}

// acquire does AcquireBytes on lk, the live lock of the name if any; the name is
// given as a string or, to be copied only if needed, as bytes.
func (t *Table[T]) acquire(c *Claim[T], lk *lock[T], name string, nameBytes []byte, now time.Time) bool {
	if c.state != Idle {
		panic("locktable: AcquireBytes on a " + c.state.String() + " claim")
	}
	if lk != nil {
		c.lock = lk
		c.state = Waiting
		lk.q.pushBack(c)
		t.waiting++
		return false
	}
	// Compute the token before touching any state so that the exhaustion
	// panic in NextToken leaves the table consistent.
	tok, ok := t.issue(c, now)
	if nameBytes != nil {
		name = string(nameBytes)
	}
	lk = t.newLock(name)
	t.locks[lk.name] = lk
	if !ok { // block mode: the lock is c's, its token comes with Resume
		t.hold(lk, c)
		return false
	}
	t.grant(lk, c, tok)
	return true
}

// Release takes c out of the table. A holder hands the lock to the head of
// its queue, which gets a fresh token, becomes Holding, and is returned; a
// waiter leaves its queue in O(1) without disturbing the others' order.
// Returns nil when nobody was promoted; in block mode (blocks.go) the head
// of the queue may instead become Pending, its token to come with Resume,
// and a Pending claim released passes its place on the same way. A lock with no holder and no waiters
// is forgotten (deleted from the map; its struct is recycled through a free
// list so that steady-state grant/release allocates nothing). Releasing an
// Idle claim is a no-op returning nil. After Release, c is Idle with
// Token()==0.
//
// Every way a session ends (close, lease expiry, kick, forced release) is a
// Release, so this is the only place promotion happens.
func (t *Table[T]) Release(c *Claim[T], now time.Time) (promoted *Claim[T]) {
	lk := c.lock
	if c.state == Idle {
		return nil
	}
	if c.state == Waiting {
		// The lock keeps its holder, so it stays live.
		lk.q.remove(c)
		t.waiting--
		c.reset()
		return nil
	}
	if c.state == Pending {
		t.pending.remove(c)
		t.waiting--
	}
	next := lk.q.head
	if next == nil {
		c.reset()
		t.forget(lk)
		return nil
	}
	tok, ok := t.issue(next, now) // before mutating, as in acquire
	lk.q.remove(next)
	t.waiting--
	c.reset()
	if !ok {
		t.hold(lk, next)
		return nil
	}
	t.grant(lk, next, tok)
	return next
}

// grant makes c the holder of lk with token tok, which must come from
// NextToken(t.last, …).
func (t *Table[T]) grant(lk *lock[T], c *Claim[T], tok uint64) {
	t.last = tok
	lk.holder = c
	c.lock = lk
	c.state = Holding
	c.token = tok
}
