// Package scenario is bench's scenarios S0 to S9, the loads that drive the
// servers in them, and the servers' processes: a Run starts the peers, runs
// the wanted scenarios in order and fills the report with their tables.
package scenario

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/monolock/monolock/bench/check"
	"github.com/monolock/monolock/bench/clock"
	"github.com/monolock/monolock/bench/machine"
	"github.com/monolock/monolock/bench/peers"
	"github.com/monolock/monolock/bench/progress"
	"github.com/monolock/monolock/bench/report"
	"github.com/monolock/monolock/internal/testsupport/proc"
)

// Config is what a run of the scenarios is given: the command's flags and
// what main made for the run.
type Config struct {
	Quick       bool          // small sizes
	Only        string        // the scenarios to run, e.g. "S1,S3"; empty for all
	Peers       []string      // the peers to start
	RedisRetry  time.Duration // Redis waiters retry after a random pause in [d, 2d)
	WaitQuiet   time.Duration // before starting, wait up to this long for other load to drop
	Progress    bool          // draw the progress bar on Stderr
	MaxSessions int           // the most sessions the descriptor limit leaves room for
	Monolock    string        // the monolock binary
	Self        string        // this binary: its floor-server and release-loop subcommands
	LogDir      string        // the servers' logs; empty for none
	Tmp         string        // the run's temporary directory (certificates, audit logs)
	Procs       *proc.Group   // every child process of the run
	Stderr      io.Writer
}

// Run is one run's state.
type Run struct {
	opt      Config
	sz       sizes
	srv      *servers
	peers    []peers.Peer
	skipped  []report.PeerStatus
	report   *report.Report
	prog     *progress.Bar
	checkers []namedChecker
	stderr   io.Writer
	tmp      string          // the run's temporary directory (certificates, audit logs)
	nsPairs  uint32          // network namespace pairs made so far (S9, one at a time)
	clock    clock.Clock     // the run's: every load, window and peer reads it
	s7Etcd   *peers.EtcdPeer // the etcd S7's +ha-etcd node uses, started by S7 and stopped after it
}

// NewRun prepares a run whose results go into rep.
func NewRun(cfg Config, rep *report.Report) *Run {
	sz := fullSizes(cfg.MaxSessions)
	if cfg.Quick {
		sz = quickSizes(cfg.MaxSessions)
	}
	b := &Run{opt: cfg, sz: sz, report: rep, stderr: cfg.Stderr, tmp: cfg.Tmp, clock: clock.New(),
		srv: &servers{monolockBin: cfg.Monolock, selfBin: cfg.Self, logDir: cfg.LogDir, procs: cfg.Procs}}
	if !b.withPeers() {
		b.opt.Peers = nil
	}
	b.prog = progress.New(cfg.Stderr, b.countSteps(len(b.opt.Peers)), cfg.Progress)
	return b
}

// withPeers reports whether a scenario the peers take part in runs.
func (b *Run) withPeers() bool { return b.want("S1") || b.want("S2") || b.want("S4") }

// Log prints a line above the progress bar.
func (b *Run) Log(line string) { b.prog.Log(line) }

// Execute starts the peers, runs the wanted scenarios and fills the report
// with their tables, the peers' status, the violations the checkers saw and
// the errors.
func (b *Run) Execute() {
	rep := b.report
	if b.opt.WaitQuiet > 0 {
		b.prog.Log("waiting for the machine to be quiet …")
		rep.Machine.Background = machine.WaitQuiet(b.opt.WaitQuiet)
		b.prog.Log("machine: " + rep.Machine.Background)
	}
	if len(b.opt.Peers) > 0 {
		b.step("starting peers")
		b.peers, rep.Peers = peers.Start(b.opt.Procs, b.clock, b.opt.Peers, b.tmp, b.opt.LogDir, b.opt.RedisRetry)
		for _, s := range rep.Peers {
			if s.Status == "skipped" {
				b.skipped = append(b.skipped, s)
				b.prog.Log(fmt.Sprintf("peer %s skipped: %s", s.Name, s.Reason))
			}
		}
	}
	scs := map[string]*report.Scenario{}
	// Peers take part in S0–S2 and S4; they are stopped before S3 and S5–S7
	// so that the session-heavy and monolock-only runs have the machine to
	// themselves.
	type scenarioRun struct {
		id string
		fn func() *report.Scenario
	}
	runWanted := func(runs ...scenarioRun) {
		for _, s := range runs {
			if b.want(s.id) {
				scs[s.id] = s.fn()
			}
		}
	}
	runWanted(scenarioRun{"S0", b.s0}, scenarioRun{"S1", b.s1}, scenarioRun{"S2", b.s2}, scenarioRun{"S4", b.s4})
	for _, p := range b.peers {
		p.Stop()
	}
	runWanted(scenarioRun{"S3", b.s3}, scenarioRun{"S5", b.s5}, scenarioRun{"S6", b.s6}, scenarioRun{"S7", b.s7}, scenarioRun{"S8", b.s8}, scenarioRun{"S9", b.s9})
	b.prog.Finish()

	for _, id := range []string{"S0", "S1", "S2", "S3", "S4", "S5", "S6", "S7", "S8", "S9"} {
		if sc, ok := scs[id]; ok {
			rep.Scenarios = append(rep.Scenarios, sc)
		}
	}
	report.ComputeRatios(rep.Scenarios)
	rep.Monolock = b.srv.version
	for _, nc := range b.checkers {
		for _, v := range nc.chk.Violations() {
			rep.Violations = append(rep.Violations, nc.name+": "+v)
		}
	}
}

type namedChecker struct {
	name string
	chk  *check.Checker
}

// checker returns a fresh checker whose violations end up in the report.
func (b *Run) checker(name string) *check.Checker {
	c := check.New()
	b.checkers = append(b.checkers, namedChecker{name, c})
	return c
}

// fail records an error that makes the run exit non-zero.
func (b *Run) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	b.report.Errors = append(b.report.Errors, msg)
	b.prog.Log("error: " + msg)
}

// failRow records err, from where, as fail does, and adds sys's figure to sc
// as an error row.
func (b *Run) failRow(sc *report.Scenario, sys, figure, where string, err error) {
	b.fail("%s: %v", where, err)
	sc.Add(&report.Row{System: sys, Figure: figure, Status: "error", Note: err.Error()})
}

func (b *Run) step(desc string) { b.prog.Step(desc) }

// skippedRows adds a "skipped" row for every peer that did not start.
func (b *Run) skippedRows(sc *report.Scenario, figure string) {
	for _, s := range b.skipped {
		sc.Add(&report.Row{System: s.Name, Figure: figure, Status: "skipped", Note: s.Reason})
	}
}

func (b *Run) redisRetry() (time.Duration, bool) {
	for _, p := range b.peers {
		if r, ok := p.(*peers.RedisPeer); ok {
			return r.Retry(), true
		}
	}
	return 0, false
}

func (b *Run) want(id string) bool {
	if b.opt.Only == "" {
		return true
	}
	for f := range strings.SplitSeq(b.opt.Only, ",") {
		if strings.EqualFold(strings.TrimSpace(f), id) {
			return true
		}
	}
	return false
}

// countSteps is the progress bar's total.
func (b *Run) countSteps(peers int) int {
	n := 0
	if peers > 0 {
		n++
	}
	if b.want("S0") {
		n += 4
	}
	if b.want("S8") {
		n += 2 // one database at a time
	}
	if b.want("S9") {
		n += len(s9Loops) + 1 // the loops, then the loss case
	}
	for _, id := range []string{"S1", "S2", "S4"} {
		if b.want(id) {
			n += 1 + peers
		}
	}
	if b.want("S1") {
		n += 3 * cycleCPURuns // server CPU per cycle: monolock and both floors
	}
	if b.want("S3") {
		n += 2*b.sz.s3Pairs + 2
		for _, s := range b.sz.s3Sessions {
			if s != b.sz.s3Floor {
				n += 2
			}
		}
	}
	if b.want("S5") {
		n += len(b.sz.s5Queues) + 1
	}
	if b.want("S6") {
		n += b.sz.s6Runs * len(tlsModes)
	}
	if b.want("S7") {
		n += 2 * b.sz.s7Runs * len(b.s7Configs())
	}
	return n
}
