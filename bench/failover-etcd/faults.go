package main

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/monolock/monolock/bench/internal/failkit"
)

// What a fault is expected to do to the leader's term.
type expect int

const (
	// takeover: another node's term serves next; D runs from the fault to
	// its first grant.
	takeover expect = iota
	// keepTerm: the leader keeps its term; D is the longest time without
	// a grant from the fault to the end of the round.
	keepTerm
	// afterRepair: no client is served until the harness repairs the
	// fault; D runs from the repair to the next grant.
	afterRepair
)

// fault is one kind of fault. inject runs at the fault's moment and returns
// when the fault is over as far as the round is concerned (for a
// partition, once it is repaired), with the moment D runs from.
type fault struct {
	name   string
	expect expect
	// silent: no node may grant from the leader's deadline (fault +
	// 0.8 × ttl) until the repair: the leader steps down and no other can
	// be elected.
	silent bool
	inject func(h *harness, leader *node, at time.Time) (from time.Time, err error)
}

var faults = []fault{
	{"SIGKILL of the leader", takeover, false, func(h *harness, l *node, at time.Time) (time.Time, error) {
		return at, l.signal(syscall.SIGKILL)
	}},
	{"SIGSTOP of the leader, SIGCONT after the takeover", takeover, false, func(h *harness, l *node, at time.Time) (time.Time, error) {
		if err := l.signal(syscall.SIGSTOP); err != nil {
			return at, err
		}
		_, err := h.awaitOtherLeader(l)
		// Thawed, its first turn must end its term (its deadline passed):
		// a heartbeat waiting in a socket gets ERROR 0x01, never a grant.
		return at, errors.Join(err, l.signal(syscall.SIGCONT))
	}},
	{"leader cut off from etcd, not from its clients", takeover, false, func(h *harness, l *node, at time.Time) (time.Time, error) {
		if err := l.iptables(false, h.memberAddrs()...); err != nil {
			return at, err
		}
		_, err := h.awaitOtherLeader(l)
		return at, errors.Join(err, l.iptables(true, h.memberAddrs()...))
	}},
	{"clients cut off from the leader, etcd still sees it", afterRepair, false, func(h *harness, l *node, at time.Time) (time.Time, error) {
		if err := l.iptables(false, addrClient); err != nil {
			return at, err
		}
		time.Sleep(h.cfg.outage)
		return time.Now(), l.iptables(true, addrClient)
	}},
	{"etcd raft leader member killed", keepTerm, false, func(h *harness, l *node, at time.Time) (time.Time, error) {
		m, err := h.etcdLeader()
		if err != nil {
			return at, err
		}
		m.kill()
		time.Sleep(h.cfg.outage)
		return at, nil // restarted by repair
	}},
	{"etcd quorum lost (two members killed), then restored", afterRepair, true, func(h *harness, l *node, at time.Time) (time.Time, error) {
		h.members[0].kill()
		h.members[1].kill()
		time.Sleep(h.cfg.outage)
		for _, m := range h.members[:2] {
			if err := m.start(h.cfg.etcd); err != nil {
				return time.Now(), err
			}
		}
		return time.Now(), nil
	}},
	{"leader's wall clock stepped back 1 h, then SIGKILL", takeover, false, func(h *harness, l *node, at time.Time) (time.Time, error) {
		for _, n := range h.nodes { // the leader's now, and the next leader's too
			if n.alive() {
				if err := n.setClockOffset(-time.Hour); err != nil {
					return at, err
				}
			}
		}
		time.Sleep(2 * time.Second) // it goes on granting on the stepped clock
		return time.Now(), l.signal(syscall.SIGKILL)
	}},
}

func (h *harness) memberAddrs() []string {
	var out []string
	for _, m := range h.members {
		out = append(out, m.addr)
	}
	return out
}

// etcdLeader is the member that says it is the raft leader.
func (h *harness) etcdLeader() (*member, error) {
	var leader *member
	err := failkit.Await(10*time.Second, "an etcd raft leader", func() bool {
		for _, m := range h.members {
			if m.alive() && m.isLeader() {
				leader = m
				return true
			}
		}
		return false
	})
	return leader, err
}

// awaitOtherLeader waits until a node other than old answers /readyz 200.
func (h *harness) awaitOtherLeader(old *node) (*node, error) {
	var leader *node
	err := failkit.Await(30*time.Second, "another node leading", func() bool {
		for _, n := range h.nodes {
			if n != old && n.role() == "leader" {
				leader = n
				return true
			}
		}
		return false
	})
	return leader, err
}

// round injects one fault and measures what follows, then repairs every
// member and node for the next round.
func (h *harness) round(f fault) (row, error) {
	leader, err := h.awaitLeader()
	if err != nil {
		return row{}, err
	}
	cr, err := failkit.StartSteady(h.self, h.net.NS("client"), h.cfg.Clients, "-addr", h.clientAddrs(),
		"-n", fmt.Sprint(h.cfg.Clients), "-locks", fmt.Sprint(h.cfg.Locks), "-lease", h.cfg.Lease.String())
	if err != nil {
		return row{}, err
	}
	h.clientRun = cr
	defer func() { h.clientRun = nil }()

	o := observation{fault: f, ttl: h.cfg.ttl, lease: h.cfg.Lease, clients: h.cfg.Clients, leader: leader.current()}
	o.faultAt = time.Now()
	stepDown := make(chan time.Duration, 1)
	if f.silent {
		go func() { stepDown <- h.watchStepDown(leader, o.faultAt) }()
	}
	from, err := f.inject(h, leader, o.faultAt)
	if err != nil {
		_, _ = cr.Stop()
		return row{}, fmt.Errorf("injecting %q: %w", f.name, err)
	}
	o.from = from
	if f.silent {
		o.stepDown = <-stepDown
	}
	// Every client answered again by the term that serves next; what is
	// missing shows in the row.
	_ = failkit.Await(30*time.Second, "every client answered again", func() bool { return cr.AnsweredSince(from) == h.cfg.Clients })
	time.Sleep(h.cfg.Lease + 250*time.Millisecond) // any holder of the old term has given up
	if o.events, err = cr.Stop(); err != nil {
		return row{}, err
	}
	time.Sleep(100 * time.Millisecond) // the audit batches (10ms) are on disk
	for _, n := range h.nodes {
		rg, err := n.grants()
		if err != nil {
			return row{}, err
		}
		o.runs = append(o.runs, rg...)
	}
	return measure(o), h.repair()
}

// watchStepDown polls the leader's /readyz from the fault until it stops
// answering 200 and returns how long that took (-1: not within 3 × ttl).
func (h *harness) watchStepDown(l *node, at time.Time) time.Duration {
	err := failkit.Await(3*h.cfg.ttl, "the leader stepping down", func() bool { return l.role() != "leader" })
	if err != nil {
		return -1
	}
	return time.Since(at)
}

// repair restarts what a fault stopped: every etcd member, every node
// (SIGCONT first), the clocks back to 0; then waits for a healthy cluster
// and one leader.
func (h *harness) repair() error {
	for _, m := range h.members {
		_ = m.signal(syscall.SIGCONT)
		if !m.alive() {
			if err := m.start(h.cfg.etcd); err != nil {
				return err
			}
		}
	}
	if err := h.awaitEtcd(); err != nil {
		return err
	}
	for _, n := range h.nodes {
		_ = n.signal(syscall.SIGCONT)
		if !n.alive() {
			if err := n.start(h.cfg.Server, h.cfg, h.endpoints()); err != nil {
				return err
			}
			continue
		}
		if n.current().offsetAt(time.Now()) != 0 {
			if err := n.setClockOffset(0); err != nil {
				return err
			}
		}
	}
	_, err := h.awaitLeader()
	return err
}
