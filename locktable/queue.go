package locktable

// queue is an intrusive doubly linked FIFO of waiting claims. The links live
// in the Claims themselves, so enqueueing allocates nothing and a waiter can
// leave from any position in O(1) without a search; that is what keeps a mass
// disconnect of N waiters at O(N) total instead of O(N²).
type queue[T any] struct {
	head, tail *Claim[T]
	len        int
}

// pushBack appends c, which must not be linked into any queue.
func (q *queue[T]) pushBack(c *Claim[T]) {
	c.prev, c.next = q.tail, nil
	if q.tail != nil {
		q.tail.next = c
	} else {
		q.head = c
	}
	q.tail = c
	q.len++
}

// remove unlinks c, which must be in q, and clears its links.
func (q *queue[T]) remove(c *Claim[T]) {
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		q.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		q.tail = c.prev
	}
	c.prev, c.next = nil, nil
	q.len--
}
