package main

import (
	"errors"
	"fmt"
	"github.com/monolock/monolock/internal/testsupport/poll"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/monolock/monolock/internal/testsupport/proc"
)

// The faults, in the order of the table.
const (
	faultKill    = "SIGKILL of the primary's monolock"
	faultCut     = "primary host cut off (link down), monolock running"
	faultStop    = "SIGSTOP of the primary's monolock, SIGCONT after the move"
	faultSIGTERM = "clean SIGTERM of the primary (-shutdown-delay)"
)

var faults = []string{faultKill, faultCut, faultStop, faultSIGTERM}

// clientRun is one client process and the events it has written so far.
type clientRun struct {
	child *proc.Child
	done  chan struct{} // the events are read to the end

	mu       sync.Mutex
	events   []event
	answered map[int]time.Time // each client's last answer
	err      error
}

func (h *harness) startClients() (*clientRun, error) {
	child, err := proc.StartChild(h.self, proc.ChildOptions{
		Name: "the client process", Netns: h.net.hosts["client"], Stderr: os.Stderr,
		Args: []string{"clients", "-n", fmt.Sprint(h.cfg.clients), "-locks", fmt.Sprint(h.cfg.locks), "-lease", h.cfg.lease.String()},
	})
	if err != nil {
		return nil, err
	}
	cr := &clientRun{child: child, done: make(chan struct{}), answered: map[int]time.Time{}}
	go func() {
		defer close(cr.done)
		err := readEvents(child.Lines(), cr.add)
		<-child.Done()
		cr.mu.Lock()
		cr.err = errors.Join(err, child.Err())
		cr.mu.Unlock()
	}()
	return cr, nil
}

// add records one event as it arrives.
func (cr *clientRun) add(e event) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	cr.events = append(cr.events, e)
	if e.Kind == "answered" {
		cr.answered[e.C] = time.Unix(0, e.At)
	}
}

// answeredSince counts the clients whose last answer came at or after t.
func (cr *clientRun) answeredSince(t time.Time) int {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	n := 0
	for _, at := range cr.answered {
		if !at.Before(t) {
			n++
		}
	}
	return n
}

// stop closes the process's stdin, which ends it, and returns its events.
func (cr *clientRun) stop() ([]event, error) {
	if err := cr.child.Close(20 * time.Second); errors.Is(err, proc.ErrKilled) {
		return nil, err
	}
	<-cr.done
	cr.mu.Lock()
	defer cr.mu.Unlock()
	if cr.err != nil {
		return nil, fmt.Errorf("client process: %w", cr.err)
	}
	return cr.events, nil
}

// round injects one fault into the current primary and measures the
// failover to the standby, then repairs the pair for the next round.
func (h *harness) round(fault string) (row, error) {
	m, s, err := h.roles()
	if err != nil {
		return row{}, err
	}
	cr, err := h.startClients()
	if err != nil {
		return row{}, err
	}
	h.clientRun = cr
	defer func() { h.clientRun = nil }()
	started := time.Now()
	if err := h.await(30*time.Second, "every client answered by the primary", func() bool {
		return cr.answeredSince(started) == h.cfg.clients
	}); err != nil {
		_, _ = cr.stop()
		return row{}, err
	}
	time.Sleep(time.Second) // steady state: holds, queues and writes under way

	o := observation{fault: fault, lease: h.cfg.lease, slack: h.cfg.slack, clients: h.cfg.clients}
	o.faultAt = time.Now()
	switch fault {
	case faultKill:
		err = m.signalMonolock(syscall.SIGKILL)
	case faultCut:
		err = h.net.setLink(m.name, false)
	case faultStop:
		err = m.signalMonolock(syscall.SIGSTOP)
	case faultSIGTERM:
		err = m.signalMonolock(syscall.SIGTERM)
	}
	if err != nil {
		_, _ = cr.stop()
		return row{}, fmt.Errorf("injecting %q: %w", fault, err)
	}

	var vipLeft time.Time
	recovered := func() bool {
		now := time.Now()
		if vipLeft.IsZero() && !h.net.hasVIP(m.name) {
			vipLeft = now
		}
		if o.vipArrived.IsZero() && h.net.hasVIP(s.name) {
			o.vipArrived = now
			if fault == faultStop {
				_ = m.signalMonolock(syscall.SIGCONT) // thaw it once the address has moved
			}
		}
		return !vipLeft.IsZero() && !o.vipArrived.IsZero() && len(m.fences(o.faultAt)) > 0 &&
			!m.monoAlive() && cr.answeredSince(o.vipArrived) == h.cfg.clients
	}
	_ = h.await(30*time.Second, "failover", recovered) // what is missing shows in the row
	o.confirmEnd = o.faultAt
	if fault == faultSIGTERM && !vipLeft.IsZero() {
		o.confirmEnd = vipLeft
	}
	// Long enough for every holder of the old primary to have given up.
	if wait := time.Until(o.confirmEnd.Add(h.cfg.lease + 250*time.Millisecond)); wait > 0 {
		time.Sleep(wait)
	}
	events, err := cr.stop()
	if err != nil {
		return row{}, err
	}
	o.events = events
	if f := m.fences(o.faultAt); len(f) > 0 {
		o.fencedAt = f[0]
	}
	o.oldAlive = m.monoAlive()
	time.Sleep(100 * time.Millisecond) // the standby's audit batch (10ms) is on disk
	if o.oldGrants, err = readGrants(m.audit); err != nil && !errors.Is(err, os.ErrNotExist) {
		return row{}, err
	}
	if o.newGrants, err = readGrants(s.audit); err != nil {
		return row{}, err
	}
	r := measure(o)
	return r, h.repair(m, s)
}

// repair brings the old primary back as the standby: its link up, a fresh
// monolock, and keepalived in BACKUP while the other host is MASTER.
func (h *harness) repair(old, cur *serverHost) error {
	if err := h.net.setLink(old.name, true); err != nil {
		return err
	}
	old.stopMonolock()
	if err := old.startMonolock(h.cfg.server, h.cfg.shutdownDelay); err != nil {
		return err
	}
	return h.await(60*time.Second, "the old primary back as BACKUP", func() bool {
		return old.vrrpState() == "BACKUP" && cur.vrrpState() == "MASTER" && h.net.hasVIP(cur.name) && !h.net.hasVIP(old.name)
	})
}

// roles returns the host holding the address and the other one.
func (h *harness) roles() (primary, standby *serverHost, err error) {
	a, b := h.hosts[0], h.hosts[1]
	switch {
	case h.net.hasVIP(a.name) && !h.net.hasVIP(b.name):
		return a, b, nil
	case h.net.hasVIP(b.name) && !h.net.hasVIP(a.name):
		return b, a, nil
	}
	return nil, nil, errors.New("not exactly one host holds the virtual address")
}

// await polls cond (at most 20ms apart) until it holds or the timeout passes.
func (h *harness) await(timeout time.Duration, what string, cond func() bool) error {
	return poll.Until(timeout, func() error {
		if !cond() {
			return fmt.Errorf("waiting for %s", what)
		}
		return nil
	})
}
