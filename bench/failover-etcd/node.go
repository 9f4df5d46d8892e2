package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/monolock/monolock/bench/internal/failkit"
	"github.com/monolock/monolock/internal/testsupport/proc"
)

// clockOffsetEnv names the file a monolock started by this harness reads
// its wall-clock offset from (a Go duration, "-1h"): the server's test-only
// knob for the "wall clock stepped back" fault. The harness writes the file;
// the server rereads it while it runs.
const clockOffsetEnv = "MONOLOCK_TEST_WALL_CLOCK_OFFSET_FILE"

// node is one monolock host: a namespace running bin/monolock with -ha-etcd.
// Every run writes an audit log of its own; all of them are kept, since the
// token order is checked across every grant of every run.
type node struct {
	name, addr, ns string
	dir            string
	p              *proc.Process
	runs           []*nodeRun // every run, the current one last
}

// nodeRun is one process of a node: its audit log and the wall-clock
// offsets it was given, to read its audit times on the harness's clock.
type nodeRun struct {
	node    string
	audit   string
	started time.Time
	offsets []offsetChange
}

type offsetChange struct {
	at     time.Time // when the harness wrote it
	offset time.Duration
}

// offsetAt is the offset the run's clock had at harness time t (a grant
// within a moment of a change may be read with either: the harness never
// uses those for a time).
func (r *nodeRun) offsetAt(t time.Time) time.Duration {
	var o time.Duration
	for _, c := range r.offsets {
		if !t.Before(c.at) {
			o = c.offset
		}
	}
	return o
}

// harnessTime turns a time the run's server wrote into the harness's: the
// server's reading minus the offset it had then. The offset is the latest
// one that explains the reading with a moment within the run (from its
// start to now).
func (r *nodeRun) harnessTime(read, now time.Time) time.Time {
	cands := append([]time.Duration{0}, offsetsOf(r.offsets)...)
	for i := len(cands) - 1; i >= 0; i-- {
		t := read.Add(-cands[i])
		if !t.Before(r.started) && !t.After(now) && r.offsetAt(t) == cands[i] {
			return t
		}
	}
	return read
}

func offsetsOf(cs []offsetChange) []time.Duration {
	out := make([]time.Duration, len(cs))
	for i, c := range cs {
		out[i] = c.offset
	}
	return out
}

func (n *node) protoAddr() string  { return n.addr + ":7070" }
func (n *node) offsetFile() string { return filepath.Join(n.dir, "clock-offset") }
func (n *node) current() *nodeRun  { return n.runs[len(n.runs)-1] }

// start runs a new monolock on the node, clock offset 0, campaigning.
func (n *node) start(bin string, c config, endpoints string) error {
	if err := os.WriteFile(n.offsetFile(), []byte("0s\n"), 0o644); err != nil {
		return err
	}
	run := &nodeRun{node: n.name, audit: filepath.Join(n.dir, fmt.Sprintf("audit-%d.jsonl", len(n.runs)+1)), started: time.Now()}
	p, err := proc.Monolock(bin, proc.Options{
		Name:  "monolock of node " + n.name,
		Netns: n.ns,
		Args: []string{"-listen", "0.0.0.0:7070", "-ops-listen", "127.0.0.1:9090", "-audit-log", run.audit,
			"-ha-etcd", endpoints, "-ha-cluster", clusterKey, "-ha-ttl", c.ttl.String(),
			"-ha-name", n.name + " " + n.protoAddr()},
		Env:     []string{clockOffsetEnv + "=" + n.offsetFile()},
		LogFile: filepath.Join(n.dir, fmt.Sprintf("monolock-%d.log", len(n.runs)+1)),
	})
	if err != nil {
		return err
	}
	n.p = p
	n.runs = append(n.runs, run)
	return nil
}

func (n *node) alive() bool { return n.p != nil && n.p.Alive() }

func (n *node) signal(sig syscall.Signal) error {
	if !n.alive() {
		return errors.New("monolock of node " + n.name + " is not running")
	}
	return n.p.Signal(sig)
}

// kill ends the server (a stopped one too) if it still runs.
func (n *node) kill() {
	if n.alive() {
		_ = n.p.Signal(syscall.SIGCONT)
		n.p.Kill()
	}
}

// setClockOffset steps the wall clock of the node's server.
func (n *node) setClockOffset(d time.Duration) error {
	if err := os.WriteFile(n.offsetFile(), []byte(d.String()+"\n"), 0o644); err != nil {
		return err
	}
	r := n.current()
	r.offsets = append(r.offsets, offsetChange{at: time.Now(), offset: d})
	return nil
}

// role is "leader" (/readyz 200), "follower" (503) or "" (no answer).
func (n *node) role() string {
	if !n.alive() {
		return ""
	}
	switch code, _ := nsGet(n.ns, "http://127.0.0.1:9090/readyz"); code {
	case 200:
		return "leader"
	case 503:
		return "follower"
	}
	return ""
}

// iptables adds (or, with del, removes) DROP rules in the node's namespace
// for traffic to and from each of addrs: the node cut off from them alone.
func (n *node) iptables(del bool, addrs ...string) error {
	op := "-I"
	if del {
		op = "-D"
	}
	for _, a := range addrs {
		for _, rule := range [][]string{{"INPUT", "-s", a}, {"OUTPUT", "-d", a}} {
			args := append([]string{"netns", "exec", n.ns, "iptables", "-w", op}, rule...)
			if err := failkit.Run("ip", append(args, "-j", "DROP")...); err != nil {
				return err
			}
		}
	}
	return nil
}

// grants reads every run's audit log, times on the harness's clock.
func (n *node) grants() ([]runGrants, error) {
	var out []runGrants
	now := time.Now()
	for _, r := range n.runs {
		gs, err := failkit.ReadGrants(r.audit)
		if errors.Is(err, os.ErrNotExist) {
			continue // a run that never wrote (killed before its first event)
		}
		if err != nil {
			return nil, err
		}
		for i := range gs {
			gs[i].At = r.harnessTime(gs[i].At, now)
		}
		out = append(out, runGrants{run: r, grants: gs})
	}
	return out, nil
}

// runGrants are the grants of one run, in its log's order.
type runGrants struct {
	run    *nodeRun
	grants []failkit.Grant
}

func (r runGrants) name() string {
	return r.run.node + " " + strings.TrimSuffix(filepath.Base(r.run.audit), ".jsonl")
}
