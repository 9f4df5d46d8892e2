// Package fenced is the fenced resource of the harnesses: the place where a
// lock holder's guarded work lands. Every write carries the holder's fencing
// token; the resource asks a fence.Fence whether to admit it, so the rule is
// the one of package fence (a token ≥ the largest admitted for the lock,
// compared as unsigned, never 0) whichever harness writes.
//
// It records every attempt, admitted or not, in the order the attempts were
// decided, with what the harnesses' checks read: lock, token, writer, time
// and the largest token admitted before. One mutex per lock orders that
// lock's attempts, so "the old holder's last write came after the new
// holder's first" is read off one clock in one order. The store is any Fence
// (fence.Memory unless Options say otherwise), so a harness can put a
// database behind it; a lock's mutex is held across the store's Admit, which
// keeps that order at the price of one write at a time per lock. Attempts on
// different locks do not wait for each other, as they would not on a real
// resource: a single mutex would queue every holder behind every other
// lock's database transaction, and on a loaded machine stretch the time
// between a holder's check of its lock and its write's landing far beyond
// the write's own.
package fenced

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/monolock/monolock/fence"
)

// Write is one write attempt as the resource decided it.
type Write struct {
	Seq      int       // position in the resource's history
	Lock     string    // the resource (lock name) written to
	Token    uint64    // the fencing token the writer carried
	Writer   string    // who wrote, in the harness's words
	At       time.Time // taken under the resource's mutex, after the store's answer
	Accepted bool
	// Highest is the largest token admitted for Lock before this attempt:
	// through this resource, or as the store's refusal says when larger.
	Highest uint64
	// Err is the store's answer when it was not admitted (wraps fence.ErrStale
	// for a stale token).
	Err error
}

// Options say how to build a Resource.
type Options struct {
	// Store decides every admit; a new fence.Memory when nil.
	Store fence.Fence
	// Now stamps the attempts; time.Now when nil. Attempts on different
	// locks call it concurrently.
	Now func() time.Time
}

// Resource is a fenced resource. It is safe for concurrent use.
type Resource struct {
	store fence.Fence
	now   func() time.Time

	mu      sync.Mutex             // guards the fields below
	order   map[string]*sync.Mutex // per lock: held across an attempt, store included
	highest map[string]uint64      // largest token admitted through this resource
	writes  []Write
	stale   int
	written map[string]chan struct{} // closed at a writer's first attempt
}

// New returns an empty resource.
func New(o Options) *Resource {
	if o.Store == nil {
		o.Store = &fence.Memory{}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Resource{store: o.Store, now: o.Now, order: map[string]*sync.Mutex{}, highest: map[string]uint64{}, written: map[string]chan struct{}{}}
}

// Write attempts one write to lock with token and records it. The Write it
// returns says whether the store admitted it; an error from the store other
// than a stale token is also recorded as not accepted (Err says why).
//
// Attempts on one lock are decided one at a time, in Seq order; an attempt
// waits for no other lock's.
func (r *Resource) Write(ctx context.Context, lock, writer string, token uint64) Write {
	r.mu.Lock()
	order := r.order[lock]
	if order == nil {
		order = &sync.Mutex{}
		r.order[lock] = order
	}
	r.mu.Unlock()

	order.Lock()
	defer order.Unlock()
	r.mu.Lock()
	hi := r.highest[lock] // as the attempts on lock before this one left it
	r.mu.Unlock()
	err := r.store.Admit(ctx, lock, token)
	at := r.now().Round(0)
	var se *fence.StaleError
	if errors.As(err, &se) && se.Highest > hi {
		hi = se.Highest
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	w := Write{Seq: len(r.writes), Lock: lock, Token: token, Writer: writer,
		At: at, Accepted: err == nil, Highest: hi, Err: err}
	if err == nil {
		r.highest[lock] = max(hi, token)
	} else if errors.Is(err, fence.ErrStale) {
		r.stale++
	}
	r.writes = append(r.writes, w)
	ch := r.writtenLocked(writer)
	select {
	case <-ch:
	default:
		close(ch)
	}
	return w
}

// Writes returns a copy of the history, in the order of the attempts.
func (r *Resource) Writes() []Write {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Write(nil), r.writes...)
}

// Of returns the attempts on lock, in their order.
func (r *Resource) Of(lock string) []Write {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ws []Write
	for _, w := range r.writes {
		if w.Lock == lock {
			ws = append(ws, w)
		}
	}
	return ws
}

// Counts returns how many attempts were accepted, and how many were refused
// as stale.
func (r *Resource) Counts() (accepted, stale int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.writes {
		if r.writes[i].Accepted {
			accepted++
		}
	}
	return accepted, r.stale
}

// Written returns a channel that is closed once writer has attempted a
// write, so a harness awaits a holder's first write as an event.
func (r *Resource) Written(writer string) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writtenLocked(writer)
}

func (r *Resource) writtenLocked(writer string) chan struct{} {
	ch := r.written[writer]
	if ch == nil {
		ch = make(chan struct{})
		r.written[writer] = ch
	}
	return ch
}
