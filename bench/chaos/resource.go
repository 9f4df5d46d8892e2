package main

import (
	"sync"
	"time"
)

// Write is one attempt to write to the fenced resource, accepted or not.
type Write struct {
	Seq      int       // position in the resource's history (its mutex order)
	Lock     string    // which lock guards the data written
	Token    uint64    // the fencing token the writer carried
	Writer   int       // the client (worker) id
	Grant    int       // the client-side grant record the write belongs to
	At       time.Time // wall clock, taken under the resource's mutex
	Accepted bool
	Highest  uint64 // the highest token the resource had seen for Lock before this write
	// Believed: the writer's lock context was not cancelled when it wrote,
	// i.e. the client library still told it that it held the lock. A write
	// after a simulated pause is made without looking, so it may carry
	// Believed == false: that is the stale holder fencing is for.
	Believed bool
}

// Resource is the in-memory fenced resource: per lock it keeps the highest
// token seen and rejects every write carrying a smaller one (or token 0, which
// the server never issues). Writes go through it in-process, never through the
// proxies, so a holder that the server already replaced really attempts them.
type Resource struct {
	mu      sync.Mutex
	now     func() time.Time
	highest map[string]uint64
	writes  []Write
}

// NewResource returns an empty resource using the wall clock.
func NewResource() *Resource {
	return &Resource{now: time.Now, highest: make(map[string]uint64)}
}

// Write applies one write and reports whether it was accepted.
func (r *Resource) Write(lock string, token uint64, writer, grant int, believed bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	hi := r.highest[lock]
	ok := token != 0 && token >= hi
	if ok {
		r.highest[lock] = token
	}
	r.writes = append(r.writes, Write{
		Seq: len(r.writes), Lock: lock, Token: token, Writer: writer, Grant: grant,
		At: r.now().Round(0), Accepted: ok, Highest: hi, Believed: believed,
	})
	return ok
}

// Highest returns the highest token accepted for lock (0 before any write).
func (r *Resource) Highest(lock string) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.highest[lock]
}

// Writes returns a copy of the history, in the order the writes happened.
func (r *Resource) Writes() []Write {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Write(nil), r.writes...)
}

// Counts returns how many writes were accepted and rejected so far.
func (r *Resource) Counts() (accepted, rejected int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.writes {
		if r.writes[i].Accepted {
			accepted++
		} else {
			rejected++
		}
	}
	return accepted, rejected
}
