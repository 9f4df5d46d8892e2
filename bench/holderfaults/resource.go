package main

import (
	"bufio"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// resource is the fenced resource every holder writes to: a TCP service on
// loopback that takes one line per write, "LOCK HOLDER TOKEN", answers "ok"
// or "stale", and records each write with its time of arrival. Per lock it
// keeps the largest token accepted and rejects smaller ones. One mutex orders
// all arrivals, so "the old holder's last write came after the new holder's
// first" is read off one clock in one order.
type resource struct {
	ln net.Listener

	mu     sync.Mutex
	max    map[string]uint64 // largest token accepted, per lock
	writes map[string][]write
	conns  map[net.Conn]bool
	first  map[string]chan struct{} // closed at a holder's first write
}

// write is one write as the resource saw it.
type write struct {
	holder   string
	token    uint64
	at       time.Time
	accepted bool
}

func startResource() (*resource, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &resource{ln: ln, max: map[string]uint64{}, writes: map[string][]write{},
		conns: map[net.Conn]bool{}, first: map[string]chan struct{}{}}
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
	r.mu.Lock()
	defer r.mu.Unlock()
	ok := token >= r.max[lock]
	if ok {
		r.max[lock] = token
	}
	r.writes[lock] = append(r.writes[lock], write{holder: holder, token: token, at: time.Now(), accepted: ok})
	if ch := r.firstWrite(holder); ch != nil {
		select {
		case <-ch:
		default:
			close(ch)
		}
	}
	return ok
}

// firstWrite returns the channel closed at holder's first write; r.mu held.
func (r *resource) firstWrite(holder string) chan struct{} {
	ch := r.first[holder]
	if ch == nil {
		ch = make(chan struct{})
		r.first[holder] = ch
	}
	return ch
}

// awaitFirst waits for holder's first write, at most d.
func (r *resource) awaitFirst(holder string, d time.Duration) error {
	r.mu.Lock()
	ch := r.firstWrite(holder)
	r.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-time.After(d):
		return fmt.Errorf("no write from %s within %v", holder, d)
	}
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
	r.mu.Lock()
	defer r.mu.Unlock()
	var h handover
	var lastOld, firstNext time.Time
	for _, w := range r.writes[lock] {
		switch w.holder {
		case old:
			h.oldWrites++
			lastOld = w.at
			if !firstNext.IsZero() {
				h.oldAfter++
				if w.accepted {
					h.staleAccepted++
				}
			}
		case next:
			h.nextWrites++
			if firstNext.IsZero() {
				firstNext = w.at
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
