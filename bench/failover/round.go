package main

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/monolock/monolock/bench/internal/failkit"
)

// The faults, in the order of the table.
const (
	faultKill    = "SIGKILL of the primary's monolock"
	faultCut     = "primary host cut off (link down), monolock running"
	faultStop    = "SIGSTOP of the primary's monolock, SIGCONT after the move"
	faultSIGTERM = "clean SIGTERM of the primary (-shutdown-delay)"
)

var faults = []string{faultKill, faultCut, faultStop, faultSIGTERM}

// round injects one fault into the current primary and measures the
// failover to the standby, then repairs the pair for the next round.
func (h *harness) round(fault string) (row, error) {
	m, s, err := h.roles()
	if err != nil {
		return row{}, err
	}
	cr, err := failkit.StartSteady(h.self, h.net.NS("client"), h.cfg.Clients,
		"-n", fmt.Sprint(h.cfg.Clients), "-locks", fmt.Sprint(h.cfg.Locks), "-lease", h.cfg.Lease.String())
	if err != nil {
		return row{}, err
	}
	h.clientRun = cr
	defer func() { h.clientRun = nil }()

	o := observation{fault: fault, lease: h.cfg.Lease, slack: h.cfg.slack, clients: h.cfg.Clients}
	o.faultAt = time.Now()
	switch fault {
	case faultKill:
		err = m.signalMonolock(syscall.SIGKILL)
	case faultCut:
		err = h.net.SetLink(m.name, false)
	case faultStop:
		err = m.signalMonolock(syscall.SIGSTOP)
	case faultSIGTERM:
		err = m.signalMonolock(syscall.SIGTERM)
	}
	if err != nil {
		_, _ = cr.Stop()
		return row{}, fmt.Errorf("injecting %q: %w", fault, err)
	}

	var vipLeft time.Time
	recovered := func() bool {
		now := time.Now()
		if vipLeft.IsZero() && !h.net.HasAddr(m.name, vip) {
			vipLeft = now
		}
		if o.vipArrived.IsZero() && h.net.HasAddr(s.name, vip) {
			o.vipArrived = now
			if fault == faultStop {
				_ = m.signalMonolock(syscall.SIGCONT) // thaw it once the address has moved
			}
		}
		return !vipLeft.IsZero() && !o.vipArrived.IsZero() && len(m.fences(o.faultAt)) > 0 &&
			!m.monoAlive() && cr.AnsweredSince(o.vipArrived) == h.cfg.Clients
	}
	_ = h.await(30*time.Second, "failover", recovered) // what is missing shows in the row
	o.confirmEnd = o.faultAt
	if fault == faultSIGTERM && !vipLeft.IsZero() {
		o.confirmEnd = vipLeft
	}
	// Long enough for every holder of the old primary to have given up.
	if wait := time.Until(o.confirmEnd.Add(h.cfg.Lease + 250*time.Millisecond)); wait > 0 {
		time.Sleep(wait)
	}
	events, err := cr.Stop()
	if err != nil {
		return row{}, err
	}
	o.events = events
	if f := m.fences(o.faultAt); len(f) > 0 {
		o.fencedAt = f[0]
	}
	o.oldAlive = m.monoAlive()
	time.Sleep(100 * time.Millisecond) // the standby's audit batch (10ms) is on disk
	if o.oldGrants, err = failkit.ReadGrants(m.audit); err != nil && !errors.Is(err, os.ErrNotExist) {
		return row{}, err
	}
	if o.newGrants, err = failkit.ReadGrants(s.audit); err != nil {
		return row{}, err
	}
	r := measure(o)
	return r, h.repair(m, s)
}

// repair brings the old primary back as the standby: its link up, a fresh
// monolock, and keepalived in BACKUP while the other host is MASTER.
func (h *harness) repair(old, cur *serverHost) error {
	if err := h.net.SetLink(old.name, true); err != nil {
		return err
	}
	old.stopMonolock()
	if err := old.startMonolock(h.cfg.Server, h.cfg.shutdownDelay); err != nil {
		return err
	}
	return h.await(60*time.Second, "the old primary back as BACKUP", func() bool {
		return old.vrrpState() == "BACKUP" && cur.vrrpState() == "MASTER" && h.net.HasAddr(cur.name, vip) && !h.net.HasAddr(old.name, vip)
	})
}

// roles returns the host holding the address and the other one.
func (h *harness) roles() (primary, standby *serverHost, err error) {
	a, b := h.hosts[0], h.hosts[1]
	switch {
	case h.net.HasAddr(a.name, vip) && !h.net.HasAddr(b.name, vip):
		return a, b, nil
	case h.net.HasAddr(b.name, vip) && !h.net.HasAddr(a.name, vip):
		return b, a, nil
	}
	return nil, nil, errors.New("not exactly one host holds the virtual address")
}

// await polls cond until it holds or the timeout passes.
func (h *harness) await(timeout time.Duration, what string, cond func() bool) error {
	return failkit.Await(timeout, what, cond)
}
