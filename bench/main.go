// Command bench is monolock's benchmark harness: it starts monolock, a bare
// gnet server (the floor) and the installed peers (Redis, etcd, PostgreSQL)
// on loopback, drives each with the same workloads, checks that no lock ever
// has two holders, and prints one table per scenario. bench/RESULTS.md
// describes the scenarios and holds the latest full run.
//
// It is a Go module of its own (its peers' clients stay out of the server's
// go.mod); run it from this directory:
//
//	cd bench && go run . [-quick] [-json FILE] [-out DIR] [-only S1,S3] [-peers redis,etcd,postgres]
package main

import (
	"errors"
	"flag"
	"fmt"
	"github.com/monolock/monolock/bench/charts"
	"github.com/monolock/monolock/bench/check"
	"github.com/monolock/monolock/bench/clock"
	"github.com/monolock/monolock/bench/floor"
	"github.com/monolock/monolock/bench/machine"
	"github.com/monolock/monolock/bench/peers"
	"github.com/monolock/monolock/bench/progress"
	"github.com/monolock/monolock/bench/releaseloop"
	"github.com/monolock/monolock/bench/report"
	"github.com/monolock/monolock/internal/testsupport/proc"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "floor-server" {
		os.Exit(floor.Main(os.Args[2:], os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == "release-loop" {
		os.Exit(releaseloop.Main(os.Args[2:], os.Stdout, os.Stderr))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command's flags.
type options struct {
	quick      bool
	jsonPath   string
	outDir     string
	only       string
	peers      string
	monolock   string
	redisRetry time.Duration
	noProgress bool
	waitQuiet  time.Duration
}

func parseOptions(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&o.quick, "quick", false, "small sizes: the whole run in well under a minute")
	fs.StringVar(&o.jsonPath, "json", "", "also write the results as JSON to this file")
	fs.StringVar(&o.outDir, "out", "out", "directory for PNG charts and server logs")
	fs.StringVar(&o.only, "only", "", "run only these scenarios, e.g. S1,S3 (default all)")
	fs.StringVar(&o.peers, "peers", strings.Join(peers.Names(), ","), "peers to start; empty for none")
	fs.StringVar(&o.monolock, "monolock", "../bin/monolock", "the monolock binary (built with go build when missing)")
	fs.DurationVar(&o.redisRetry, "redis-retry", time.Millisecond, "Redis waiters retry after a random pause in [d, 2d)")
	fs.BoolVar(&o.noProgress, "no-progress", false, "no progress bar on stderr")
	fs.DurationVar(&o.waitQuiet, "wait-quiet", 0, "before starting, wait up to this long for other load on the machine to drop under 15% of a core")
	fs.Usage = func() {
		_, _ = fmt.Fprintln(stderr, "usage: go run . [flags]   (in bench/)\n\nScenarios S0 floor, S1 cycle, S2 handover, S3 sessions, S4 expiry, S5 queue churn,\nS6 tls (a TLS session against a plain one), S7 bookkeeping (metrics and audit log on the grant and heartbeat paths),\nS8 fence, S9 release ports (lock cycles from one client network namespace: TIME_WAIT, connect failures; root).\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.redisRetry <= 0 {
		return o, errors.New("-redis-retry must be positive")
	}
	return o, nil
}

// bench is one run's state.
type bench struct {
	opt      options
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
	s7Etcd   *peers.EtcdPeer // the etcd S7's +ha-etcd node uses when no etcd peer runs
}

type namedChecker struct {
	name string
	chk  *check.Checker
}

// checker returns a fresh checker whose violations end up in the report.
func (b *bench) checker(name string) *check.Checker {
	c := check.New()
	b.checkers = append(b.checkers, namedChecker{name, c})
	return c
}

// fail records an error that makes the run exit non-zero.
func (b *bench) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	b.report.Errors = append(b.report.Errors, msg)
	b.prog.Log("error: " + msg)
}

// failRow records err, from where, as fail does, and adds sys's figure to sc
// as an error row.
func (b *bench) failRow(sc *report.Scenario, sys, figure, where string, err error) {
	b.fail("%s: %v", where, err)
	sc.Add(&report.Row{System: sys, Figure: figure, Status: "error", Note: err.Error()})
}

func (b *bench) step(desc string) { b.prog.Step(desc) }

// skippedRows adds a "skipped" row for every peer that did not start.
func (b *bench) skippedRows(sc *report.Scenario, figure string) {
	for _, s := range b.skipped {
		sc.Add(&report.Row{System: s.Name, Figure: figure, Status: "skipped", Note: s.Reason})
	}
}

func (b *bench) redisRetry() (time.Duration, bool) {
	for _, p := range b.peers {
		if r, ok := p.(*peers.RedisPeer); ok {
			return r.Retry(), true
		}
	}
	return 0, false
}

func (b *bench) want(id string) bool {
	if b.opt.only == "" {
		return true
	}
	for f := range strings.SplitSeq(b.opt.only, ",") {
		if strings.EqualFold(strings.TrimSpace(f), id) {
			return true
		}
	}
	return false
}

func run(args []string, stdout, stderr io.Writer) int {
	opt, err := parseOptions(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "bench: %v\n", err)
		return 2
	}
	rep := &report.Report{Started: time.Now(), Command: "go run . " + strings.Join(args, " "), Quick: opt.quick, Machine: machine.Info(),
		Violations: []string{}, Errors: []string{}}
	soft, hard, maxSessions, err := machine.RaiseNoFile(machine.EphemeralPorts())
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}
	rep.Limits = report.Limits{NoFileSoft: soft, NoFileHard: hard, MaxSessions: maxSessions}
	if maxSessions < 1000 {
		_, _ = fmt.Fprintf(stderr, "bench: the descriptor limit (%d) leaves room for only %d sessions; raise it (ulimit -n)\n", soft, maxSessions)
		return 1
	}
	sz := fullSizes(maxSessions)
	if opt.quick {
		sz = quickSizes(maxSessions)
	}
	monoBin, err := ensureMonolock(opt.monolock, stderr)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}
	self, err := os.Executable()
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}
	logDir := ""
	if opt.outDir != "" {
		logDir = filepath.Join(opt.outDir, "logs")
		_ = os.RemoveAll(logDir)
	}
	tmp, err := os.MkdirTemp("", "monolock-bench-")
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}
	_ = os.Chmod(tmp, 0o755) // peers running as another user need to reach their directories
	defer func() { _ = os.RemoveAll(tmp) }()

	procs := &proc.Group{} // every child process of this run
	b := &bench{opt: opt, sz: sz, report: rep, stderr: stderr, tmp: tmp, clock: clock.New(),
		srv: &servers{monolockBin: monoBin, selfBin: self, logDir: logDir, procs: procs}}
	var peerList []string
	for p := range strings.SplitSeq(opt.peers, ",") {
		if p = strings.TrimSpace(p); p != "" {
			peerList = append(peerList, p)
		}
	}
	withPeers := b.want("S1") || b.want("S2") || b.want("S4")
	if !withPeers {
		peerList = nil
	}
	b.prog = progress.New(stderr, b.countSteps(len(peerList)), !opt.noProgress && progress.IsTerminal(stderr))

	// Stop every child on an interrupt.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-sig
		b.prog.Log(fmt.Sprintf("bench: %v: stopping servers", s))
		procs.StopAll()
		_ = os.RemoveAll(tmp)
		os.Exit(130)
	}()
	defer procs.StopAll()

	if opt.waitQuiet > 0 {
		b.prog.Log("waiting for the machine to be quiet …")
		rep.Machine.Background = machine.WaitQuiet(opt.waitQuiet)
		b.prog.Log("machine: " + rep.Machine.Background)
	}
	if len(peerList) > 0 {
		b.step("starting peers")
		b.peers, rep.Peers = peers.Start(procs, b.clock, peerList, tmp, logDir, opt.redisRetry)
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
	rep.Finished = time.Now()
	rep.Machine.LoadAvgEnd = machine.LoadAvg()

	_, _ = fmt.Fprint(stdout, report.Render(rep))
	if opt.outDir != "" {
		files, err := charts.Write(rep, opt.outDir)
		if err != nil {
			_, _ = fmt.Fprintf(stderr, "bench: charts: %v\n", err)
			rep.Errors = append(rep.Errors, "charts: "+err.Error())
		} else if len(files) > 0 {
			_, _ = fmt.Fprintf(stdout, "charts: %s\n", strings.Join(files, ", "))
		}
	}
	if opt.jsonPath != "" {
		if err := rep.WriteJSON(opt.jsonPath); err != nil {
			_, _ = fmt.Fprintf(stderr, "bench: %v\n", err)
			return 1
		}
		_, _ = fmt.Fprintf(stdout, "json: %s\n", opt.jsonPath)
	}
	if rep.Failed() {
		_, _ = fmt.Fprintf(stderr, "bench: FAILED: %d violation(s), %d error(s)\n", len(rep.Violations), len(rep.Errors))
		return 1
	}
	return 0
}

// countSteps is the progress bar's total.
func (b *bench) countSteps(peers int) int {
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

// ensureMonolock returns the monolock binary, building it when missing.
func ensureMonolock(path string, stderr io.Writer) (string, error) {
	if _, err := os.Stat(path); err == nil {
		return filepath.Abs(path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	_, _ = fmt.Fprintf(stderr, "bench: %s is missing; building it\n", path)
	if err := proc.BuildTo(abs, "./cmd/monolock", stderr); err != nil {
		return "", fmt.Errorf("build %s (run from inside the repository, or make build): %w", path, err)
	}
	return abs, nil
}
