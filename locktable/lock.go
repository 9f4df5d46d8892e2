package locktable

// lock is the table's record of one live lock. A lock is live exactly while
// it has a holder: waiters only queue behind a holder, and releasing the
// holder either promotes a waiter or leaves the lock with nobody, at which
// point it is forgotten. So the table never keeps state for idle names, and
// its memory follows the number of sessions, not the number of names ever
// used.
type lock struct {
	table  *Table // owner, to catch a claim released into the wrong table
	name   string // also the map key; the caller's string, never copied
	holder *Claim
	q      queue
	free   *lock // next on the table's free list while recycled
}

// maxFree bounds the free list. Recycling exists so that steady-state
// grant/release on a free lock allocates nothing; one spare is enough for
// that, and a cap keeps a one-off burst of many distinct locks from pinning
// their memory forever.
const maxFree = 1024

// newLock returns a recycled lock if there is one, else a fresh one.
func (t *Table) newLock(name string) *lock {
	lk := t.free
	if lk != nil {
		t.free = lk.free
		t.nfree--
		lk.free = nil
	} else {
		lk = &lock{table: t}
	}
	lk.name = name
	return lk
}

// forget deletes an idle lock from the map and recycles its struct.
func (t *Table) forget(lk *lock) {
	delete(t.locks, lk.name)
	if t.nfree >= maxFree {
		return
	}
	// Clear the name and holder so a recycled struct keeps neither the
	// caller's string nor a released session alive; the queue is already
	// empty.
	lk.name, lk.holder = "", nil
	lk.free = t.free
	t.free = lk
	t.nfree++
}
