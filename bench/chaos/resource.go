package main

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/monolock/monolock/internal/testsupport/fenced"
)

// Write is one attempt to write to the fenced resource, accepted or not, as
// the history records it: the shared resource's record (internal/testsupport/
// fenced) with the client-side facts the checks join it with.
type Write struct {
	Seq      int       // position in the resource's history (its mutex order)
	Lock     string    // which lock guards the data written
	Token    uint64    // the fencing token the writer carried
	Writer   int       // the client (worker) id
	Grant    int       // the client-side grant record the write belongs to
	At       time.Time // wall clock, taken under the resource's mutex once the store has answered
	Accepted bool
	Highest  uint64 // the highest token the resource had seen for Lock before this write
	// Believed: Lock.Valid was true when the writer looked, right before it
	// handed the write to the resource, i.e. the client library still told
	// it that it held the lock. A write after a simulated pause is made
	// without looking, so it may carry Believed == false: that is the stale
	// holder fencing is for.
	Believed bool
	// CheckedAt is when the writer looked. The write lands later (At): after
	// the writes queued before it and, with a database behind the resource,
	// after its transaction, which a loaded machine makes long.
	CheckedAt time.Time
}

// Resource is the fenced resource of package fenced (the fence rule of
// package fence) with the chaos history's extra columns. Writes go through
// it in-process, never through the proxies, so a holder that the server
// already replaced really attempts them.
type Resource struct {
	res *fenced.Resource

	mu     sync.Mutex
	writes []Write
}

// NewResource returns an empty resource using the wall clock.
func NewResource() *Resource { return newResource(fenced.Options{}) }

func newResource(o fenced.Options) *Resource { return &Resource{res: fenced.New(o)} }

// Write applies one write, which its writer decided to make at checkedAt
// (believing it held the lock or not), and reports whether it was accepted.
func (r *Resource) Write(lock string, token uint64, writer, grant int, believed bool, checkedAt time.Time) bool {
	w := r.res.Write(context.Background(), lock, strconv.Itoa(writer), token)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, Write{
		Seq: w.Seq, Lock: lock, Token: token, Writer: writer, Grant: grant,
		At: w.At, Accepted: w.Accepted, Highest: w.Highest, Believed: believed,
		CheckedAt: checkedAt,
	})
	return w.Accepted
}

// Writes returns a copy of the history, in the order the writes happened.
func (r *Resource) Writes() []Write {
	r.mu.Lock()
	ws := slices.Clone(r.writes)
	r.mu.Unlock()
	slices.SortFunc(ws, func(a, b Write) int { return cmp.Compare(a.Seq, b.Seq) })
	return ws
}

// Counts returns how many writes were accepted and rejected so far.
func (r *Resource) Counts() (accepted, rejected int) {
	accepted, rejected = r.res.Counts()
	return accepted, rejected
}
