package locktable

// Claim is one session's claim on one lock; T is what the caller keeps in it
// (the event loop keeps a pointer to its session, which costs 8 bytes and no
// type assertion, where an interface would cost 16 and one). The caller
// allocates the Claim (the event loop embeds it in its session struct) and
// the table links it into its lock's FIFO queue intrusively (prev/next
// pointers inside Claim), so removal from anywhere in a queue is O(1) and
// enqueueing allocates nothing. The zero value is an Idle claim.
//
// A Claim must not be copied while it is Waiting or Holding: the table and
// its neighbours in the queue point at it.
type Claim[T any] struct {
	// Value is the caller's; the table never reads or writes it (like
	// container/list's Element.Value). The event loop uses it to get from a
	// promoted claim back to the session that must be told.
	Value T

	lock       *lock[T]  // the lock this claim is on; nil when Idle
	prev, next *Claim[T] // queue neighbours (of the Pending claims' queue while Pending); nil for the holder and when Idle
	state      State
	token      uint64 // non-zero only while Holding
}

// State reports whether c is idle, waiting or holding.
func (c *Claim[T]) State() State { return c.state }

// Token returns the fencing token of the grant while c is Holding, and 0
// otherwise. Token 0 is never issued, so 0 unambiguously means "no grant".
func (c *Claim[T]) Token() uint64 { return c.token }

// Name returns the lock's name while c is Waiting or Holding, and "" when
// Idle. It is the table's copy of the name, so it costs no allocation.
func (c *Claim[T]) Name() string {
	if c.lock == nil {
		return ""
	}
	return c.lock.name
}

// reset returns c to the zero Idle state, except for Value, which is the
// caller's.
func (c *Claim[T]) reset() {
	c.lock, c.prev, c.next = nil, nil, nil
	c.state = Idle
	c.token = 0
}
