package locktable

// lock is the table's record of one live lock. A lock is live exactly while
// it has a holder: waiters only queue behind a holder, and releasing the
// holder either promotes a waiter or leaves the lock with nobody, at which
// point it is forgotten. So the table never keeps state for idle names, and
// its memory follows the number of sessions, not the number of names ever
// used.
//
// It is kept small (48 bytes, whatever T is) because there is one per held
// lock, and a server holds tens of thousands.
type lock[T any] struct {
	// name is also the map key. It is made once, when the lock is created:
	// AcquireBytes copies the name's bytes into a new string. Waiters share
	// it.
	name   string
	holder *Claim[T]
	q      queue[T]
}

// maxFree bounds the free list. Recycling exists so that steady-state
// grant/release on a free lock allocates nothing; one spare is enough for
// that, and a cap keeps a one-off burst of many distinct locks from pinning
// their memory forever.
const maxFree = 1024

// newLock returns a recycled lock if there is one, else a fresh one.
func (t *Table[T]) newLock(name string) *lock[T] {
	var lk *lock[T]
	if n := len(t.free); n > 0 {
		lk = t.free[n-1]
		t.free[n-1] = nil
		t.free = t.free[:n-1]
	} else {
		lk = &lock[T]{}
	}
	lk.name = name
	return lk
}

// forget deletes an idle lock from the map and recycles its struct.
func (t *Table[T]) forget(lk *lock[T]) {
	delete(t.locks, lk.name)
	if len(t.free) >= maxFree {
		return
	}
	// Clear the name and holder so a recycled struct keeps neither the
	// name's string nor a released session alive; the queue is already
	// empty.
	lk.name, lk.holder = "", nil
	t.free = append(t.free, lk)
}
