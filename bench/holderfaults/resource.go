package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/monolock/monolock/fence"
	"github.com/monolock/monolock/internal/testsupport/fenced"
)

// resource is the fenced resource every holder writes to: the shared one of
// package fenced (the fence rule of package fence, every attempt recorded in
// one order on one clock) behind a TCP front on loopback, because the holders
// are other processes. The front takes one line per write, "LOCK HOLDER
// TOKEN", and answers "ok" or "stale".
type resource struct {
	ln    net.Listener
	fence *fenced.Resource

	mu    sync.Mutex
	conns map[net.Conn]bool
}

// startResource starts the resource's TCP front; o is the fenced
// resource's (the zero value: in memory, on the wall clock).
func startResource(o fenced.Options) (*resource, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &resource{ln: ln, fence: fenced.New(o), conns: map[net.Conn]bool{}}
	go r.accept()
	return r, nil
}

func (r *resource) addr() string { return r.ln.Addr().String() }

func (r *resource) close() {
	_ = r.ln.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	for c := range r.conns {
		_ = c.Close()
	}
}

func (r *resource) accept() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.mu.Lock()
		r.conns[c] = true
		r.mu.Unlock()
		go r.serve(c)
	}
}

func (r *resource) serve(c net.Conn) {
	defer func() {
		r.mu.Lock()
		delete(r.conns, c)
		r.mu.Unlock()
		_ = c.Close()
	}()
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 {
			return
		}
		token, err := strconv.ParseUint(f[2], 10, 64)
		if err != nil {
			return
		}
		reply := "ok\n"
		if !r.record(f[0], f[1], token) {
			reply = "stale\n"
		}
		if _, err := c.Write([]byte(reply)); err != nil {
			return
		}
	}
}

// record applies the fence and records the write.
func (r *resource) record(lock, holder string, token uint64) bool {
	return r.fence.Write(context.Background(), lock, holder, token).Accepted
}

// awaitFirst waits for holder's first write, at most d.
func (r *resource) awaitFirst(holder string, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-r.fence.Written(holder):
		return nil
	case <-t.C:
		return fmt.Errorf("no write from %s within %v", holder, d)
	}
}

// staleAttempts counts the writes to the locks named prefix… whose token
// was below one the resource had admitted for the lock, refused or not.
func (r *resource) staleAttempts(prefix string) int {
	n := 0
	for _, w := range r.fence.Writes() {
		if strings.HasPrefix(w.Lock, prefix) && (w.Token < w.Highest || errors.Is(w.Err, fence.ErrStale)) {
			n++
		}
	}
	return n
}

// staleAccepted counts those of them that the fence accepted.
func (r *resource) staleAccepted(prefix string) int {
	n := 0
	for _, w := range r.fence.Writes() {
		if strings.HasPrefix(w.Lock, prefix) && w.Accepted && w.Token < w.Highest {
			n++
		}
	}
	return n
}

// handover is what one round's writes say about the hand-over from old to
// next.
type handover struct {
	overlap       time.Duration // old's last write − next's first write, when positive
	gap           time.Duration // next's first write − old's last write, when positive
	oldAfter      int           // old's writes that arrived after next's first
	staleAccepted int           // of those, accepted (the fence failed)
	oldWrites     int
	nextWrites    int
}

func (r *resource) handover(lock, old, next string) (handover, error) {
	var h handover
	var lastOld, firstNext time.Time
	for _, w := range r.fence.Of(lock) {
		switch w.Writer {
		case old:
			h.oldWrites++
			lastOld = w.At
			if !firstNext.IsZero() {
				h.oldAfter++
				if w.Accepted {
					h.staleAccepted++
				}
			}
		case next:
			h.nextWrites++
			if firstNext.IsZero() {
				firstNext = w.At
			}
		}
	}
	if h.oldWrites == 0 || h.nextWrites == 0 {
		return h, fmt.Errorf("lock %s: %d writes from the old holder, %d from the next", lock, h.oldWrites, h.nextWrites)
	}
	if lastOld.After(firstNext) {
		h.overlap = lastOld.Sub(firstNext)
	} else {
		h.gap = firstNext.Sub(lastOld)
	}
	return h, nil
}
