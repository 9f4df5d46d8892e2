package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/monolock/monolock/bench/check"
	"github.com/monolock/monolock/bench/hist"
	"github.com/monolock/monolock/bench/peers"
	"github.com/monolock/monolock/bench/report"
	"github.com/monolock/monolock/internal/testsupport/proc"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// bkConfig is one server configuration of S7.
type bkConfig uint8

const (
	cfgBare  bkConfig = iota // no metrics, no audit log
	cfgOps                   // -ops-listen: the server keeps its metrics
	cfgAudit                 // -ops-listen and -audit-log FILE
	cfgHA                    // -ha-etcd: the leader of a one-node cluster led through a local etcd
)

var bkConfigs = []bkConfig{cfgBare, cfgOps, cfgAudit, cfgHA}

// s7Configs are the configurations S7 measures: +ha-etcd only where etcd
// is installed.
func (b *Run) s7Configs() []bkConfig {
	if _, err := exec.LookPath("etcd"); err != nil {
		return bkConfigs[:cfgHA]
	}
	return bkConfigs
}

// bookkeepingTarget is the ratio to the bare server the operations issue
// asks metrics and audit to stay under.
const bookkeepingTarget = 1.10

// System names of S7's rows; the bare server is "monolock", so the
// ×monolock column is the ratio to bare.
func (c bkConfig) system() string {
	switch c {
	case cfgOps:
		return "monolock +ops"
	case cfgAudit:
		return "monolock +ops+audit"
	case cfgHA:
		return "monolock +ha-etcd"
	}
	return report.SysMonolock
}

func (c bkConfig) tag() string { return [...]string{"bare", "ops", "ops+audit", "ha-etcd"}[c] }

// bookkeepingArgs are the server flags of c; audit is the audit log's path.
func bookkeepingArgs(c bkConfig, audit string) []string {
	switch c {
	case cfgOps:
		return []string{"-ops-listen", "127.0.0.1:0"}
	case cfgAudit:
		return []string{"-ops-listen", "127.0.0.1:0", "-audit-log", audit}
	}
	return nil
}

// grantResult is one S7 cycle run.
type grantResult struct {
	cycles     uint64 // completed inside the window
	grants     uint64 // every grant of the run, warm-up included
	cpu        time.Duration
	genCPU     time.Duration
	windowSecs float64
	lat        hist.Histogram
	other      string
	audit      auditStats
}

// cpuPerGrant is server CPU per cycle (one grant and one release), in µs.
func (r grantResult) cpuPerGrant() float64 {
	if r.cycles == 0 {
		return 0
	}
	return r.cpu.Seconds() / float64(r.cycles) * 1e6
}

func (r grantResult) rate() float64 { return float64(r.cycles) / r.windowSecs }

// auditStats is what an audit log held when its server stopped.
type auditStats struct {
	events int64 // lines
	bytes  int64
}

// readAuditStats counts the lines of an audit log.
func readAuditStats(path string) (auditStats, error) {
	f, err := os.Open(path)
	if err != nil {
		return auditStats{}, err
	}
	defer func() { _ = f.Close() }()
	return countLines(f)
}

// countLines counts newline-terminated lines and bytes.
func countLines(r io.Reader) (auditStats, error) {
	var s auditStats
	buf := make([]byte, 256<<10)
	for {
		n, err := r.Read(buf)
		s.bytes += int64(n)
		s.events += int64(bytes.Count(buf[:n], []byte{'\n'}))
		if err == io.EOF {
			return s, nil
		}
		if err != nil {
			return s, err
		}
	}
}

// s7: the cost of metrics and of the audit log on the grant path (S1's
// cycles) and on the heartbeat path (S3's sessions), against the same server
// with both off; the three configurations alternate s7Runs times.
func (b *Run) s7() *report.Scenario {
	sz := b.sz
	bkConfigs := b.s7Configs()
	at := " @" + report.GroupThousands(int64(sz.s7Sessions))
	sc := &report.Scenario{ID: "S7", Name: "bookkeeping", Desc: fmt.Sprintf(
		"monolock bare, with -ops-listen (metrics) and with -ops-listen and -audit-log FILE; grants: C=%d workers cycling as in S1 (dial, ACQUIRE, ACQUIRED, close = one grant and one release), %v after %v; heartbeats: %s sessions as in S3, every %v (lease %v), %v after %v",
		sz.workers, sz.dur, sz.warm, report.GroupThousands(int64(sz.s7Sessions)), sz.s3Lease/4, sz.s3Lease, sz.s3Window, sz.s3Warm)}
	grants := make([][]grantResult, len(bkConfigs))
	hbs := make([][]sessionsResult, len(bkConfigs))
	gFailed := make([]string, len(bkConfigs))
	hFailed := make([]string, len(bkConfigs))
	runTag := func(c bkConfig, what string, rep int) string {
		tag := c.system() + " " + what
		if sz.s7Runs > 1 {
			tag += fmt.Sprintf(" (run %d)", rep+1)
		}
		return tag
	}
	defer b.stopS7Etcd()
	for rep := range sz.s7Runs {
		measureInRotation(b, "S7", rep, grants, gFailed,
			func(i int) string { return runTag(bkConfigs[i], "grants", rep) },
			func(i int, chk *check.Checker) (grantResult, error) { return b.runGrants(bkConfigs[i], rep, chk) })
		measureInRotation(b, "S7", rep, hbs, hFailed,
			func(i int) string { return runTag(bkConfigs[i], "heartbeats", rep) },
			func(i int, chk *check.Checker) (sessionsResult, error) {
				return b.runBookkeepingSessions(bkConfigs[i], rep, chk)
			})
	}
	sum := &report.Bookkeeping{Sessions: sz.s7Sessions, Target: bookkeepingTarget}
	for i, c := range bkConfigs {
		sys := c.system()
		f := report.BookkeepingFigures{Config: c.tag()}
		if rs := grants[i]; len(rs) > 0 {
			f.CPUPerGrant = medianOf(rs, grantResult.cpuPerGrant)
			f.CyclesPerSec = medianOf(rs, grantResult.rate)
			sc.Add(&report.Row{System: sys, Figure: "server CPU per grant", Value: f.CPUPerGrant, Unit: "µs",
				Lat: summaryOf(mergedLat(rs)), Key: "grant", Lower: true, Note: grantNote(rs)})
		} else {
			sc.Add(&report.Row{System: sys, Figure: "server CPU per grant", Status: "error", Note: gFailed[i]})
		}
		if rs := hbs[i]; len(rs) > 0 {
			f.CPUPerMHb = medianOf(rs, sessionsResult.cpuPerMillion)
			sc.Add(&report.Row{System: sys, Figure: "CPU per 1M heartbeats" + at, Value: f.CPUPerMHb, Unit: "s",
				Key: "hb", Lower: true, Note: heartbeatNote(rs)})
		} else {
			sc.Add(&report.Row{System: sys, Figure: "CPU per 1M heartbeats" + at, Status: "error", Note: hFailed[i]})
		}
		sum.Configs = append(sum.Configs, f)
	}
	bare := sum.Configs[0]
	for i := range sum.Configs[1:] {
		f := &sum.Configs[i+1]
		if bare.CPUPerGrant > 0 && f.CPUPerGrant > 0 {
			f.GrantRatio = f.CPUPerGrant / bare.CPUPerGrant
		}
		if bare.CPUPerMHb > 0 && f.CPUPerMHb > 0 {
			f.HbRatio = f.CPUPerMHb / bare.CPUPerMHb
		}
	}
	b.report.Bookkeep = sum
	sc.Note("×monolock: this row ÷ the bare server's row (monolock); the target for metrics + audit is under %.2f×", bookkeepingTarget)
	if len(bkConfigs) > int(cfgHA) {
		sc.Note("monolock +ha-etcd: the leader of a one-node cluster led through a local etcd (tokens from blocks reserved in etcd, the lease kept alive every TTL/4); same flags as bare otherwise")
	} else {
		sc.Note("monolock +ha-etcd: not measured, etcd is not installed (make bench-peers)")
	}
	sc.Note("server CPU per grant = the server's utime+stime (per-thread schedstat, the audit writer's goroutine included) over the window ÷ cycles completed in it; latency columns: one cycle, as in S1")
	sc.Note("the server keeps metrics only with -ops-listen (nothing scrapes /metrics here); the audit log is a file in a temporary directory, written by its own goroutine every 10 ms")
	if sz.s7Runs > 1 {
		sc.Note("%d alternating runs of each configuration (the order rotates), medians shown (every run listed in the note)", sz.s7Runs)
	} else {
		sc.Note("one short run of each configuration: differences of 20 %% either way are noise here; quote the full run's medians")
	}
	return sc
}

// stopS7Etcd stops S7's etcd, if it started one, so that S8 and S9 have the
// machine to themselves.
func (b *Run) stopS7Etcd() {
	if b.s7Etcd != nil {
		b.s7Etcd.Stop()
		b.s7Etcd = nil
	}
}

// auditPath is the audit log of one S7 server, in the run's temporary directory.
func (b *Run) auditPath(c bkConfig, what string, rep int) string {
	if c != cfgAudit {
		return ""
	}
	return filepath.Join(b.tmp, fmt.Sprintf("s7-audit-%s-%d.jsonl", what, rep))
}

// startBookkeeping starts monolock in configuration c; stop stops it and
// returns what its audit log held (and removes the log).
func (b *Run) startBookkeeping(c bkConfig, what string, rep int) (srv *proc.Process, stop func() (auditStats, error), err error) {
	audit := b.auditPath(c, what, rep)
	args := bookkeepingArgs(c, audit)
	if c == cfgHA {
		if args, err = b.haArgs(what, rep); err != nil {
			return nil, nil, err
		}
	}
	srv, err = b.srv.monolockWith("s7-"+strings.ReplaceAll(c.tag(), "+", "-")+"-"+what, args...)
	if err != nil {
		return nil, nil, err
	}
	if c == cfgHA { // a node serves once it leads: the line says so
		if _, err := srv.WaitLog(haServing, 30*time.Second); err != nil {
			srv.Stop()
			return nil, nil, err
		}
	}
	stop = func() (auditStats, error) {
		srv.Stop()
		if audit == "" {
			return auditStats{}, nil
		}
		defer func() { _ = os.Remove(audit) }()
		return readAuditStats(audit)
	}
	return srv, stop, nil
}

// runGrants measures one S7 cycle run.
func (b *Run) runGrants(c bkConfig, rep int, chk *check.Checker) (grantResult, error) {
	var res grantResult
	srv, stop, err := b.startBookkeeping(c, "grants", rep)
	if err != nil {
		return res, err
	}
	sz := b.sz
	win := b.clock.Window(sz.warm, sz.dur)
	l := newCycleLoad(cycleAcquire, sz.workers, sz.holdLease, "s7", chk, win)
	use, ok, err := timedUsage(b.clock, srv.Pid(), win, func() error { return runLoad(b.clock, srv.Addr, l) })
	alive := srv.Alive()
	st, auditErr := stop()
	if err != nil {
		return res, err
	}
	if !alive {
		return res, errExited
	}
	if !ok || len(use.CPU) != 2 {
		return res, errors.New("could not sample the CPU")
	}
	if auditErr != nil {
		return res, fmt.Errorf("audit log: %w", auditErr)
	}
	if c == cfgAudit && st.events == 0 {
		return res, errors.New("the audit log is empty")
	}
	res.cycles, res.grants = l.count, chk.Grants()
	res.cpu, res.genCPU = use.CPU[0], use.CPU[1]
	res.windowSecs = win.Seconds()
	res.lat = l.hist
	res.other = use.OtherNote()
	res.audit = st
	return res, nil
}

// runBookkeepingSessions measures one S7 heartbeat run.
func (b *Run) runBookkeepingSessions(c bkConfig, rep int, chk *check.Checker) (sessionsResult, error) {
	srv, stop, err := b.startBookkeeping(c, "heartbeats", rep)
	if err != nil {
		return sessionsResult{}, err
	}
	sz := b.sz
	r, err := measureSessions(b.clock, srv, true, sz.s7Sessions, sz.s3Lease, sz.s3Warm, sz.s3Window, chk)
	if _, auditErr := stop(); err == nil && auditErr != nil {
		err = fmt.Errorf("audit log: %w", auditErr)
	}
	return r, err
}

func mergedLat(rs []grantResult) *hist.Histogram {
	var h hist.Histogram
	for i := range rs {
		h.Merge(&rs[i].lat)
	}
	return &h
}

// runsList is "runs a, b, c · " for more than one run, else "".
func runsList[T any](rs []T, f func(T) float64, format string) string {
	if len(rs) < 2 {
		return ""
	}
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf(format, f(r))
	}
	return "runs " + strings.Join(parts, ", ") + " · "
}

func grantNote(rs []grantResult) string {
	mid := rs[len(rs)/2]
	note := runsList(rs, grantResult.cpuPerGrant, "%.1f") + fmt.Sprintf("%s cycles/s · srv %.0f%% · gen %.0f%% cpu",
		report.GroupThousands(int64(medianOf(rs, grantResult.rate))), 100*mid.cpu.Seconds()/mid.windowSecs, 100*mid.genCPU.Seconds()/mid.windowSecs)
	if mid.audit.events > 0 && mid.grants > 0 {
		note += fmt.Sprintf(" · audit %s events (%.2f per grant), %s", report.GroupThousands(mid.audit.events),
			float64(mid.audit.events)/float64(mid.grants), mib(mid.audit.bytes))
	}
	return joinNotes(note, otherLoadWarnings(rs, func(r grantResult) string { return r.other }))
}

func heartbeatNote(rs []sessionsResult) string {
	mid := rs[len(rs)/2]
	note := runsList(rs, sessionsResult.cpuPerMillion, "%.2f") + fmt.Sprintf("%s hb/s · srv %.1f%% · gen %.0f%% cpu",
		report.GroupThousands(int64(mid.heartbeatRate)), 100*mid.cpu.Seconds()/mid.windowSecs, 100*mid.genCPU.Seconds()/mid.windowSecs)
	return joinNotes(note, otherLoadWarnings(rs, func(r sessionsResult) string { return r.other }))
}

// haServing is what a node of a cluster led through etcd logs once its
// lock port is open (eventloop.HAServingMessage).
const haServing = "ha: leading: the lock port accepts connections"

// haArgs are the flags of S7's node: the leader of a one-node cluster of its
// own (a cluster per run, so each starts from nothing) on the etcd peer, or
// an etcd started for it, with a fixed lock port (a node opens it per term).
func (b *Run) haArgs(what string, rep int) ([]string, error) {
	ep, err := b.haEtcd()
	if err != nil {
		return nil, err
	}
	port, err := peers.FreePort()
	if err != nil {
		return nil, err
	}
	return []string{"-listen", fmt.Sprintf("127.0.0.1:%d", port), "-ha-etcd", ep,
		"-ha-cluster", fmt.Sprintf("s7-%s-%d", what, rep), "-ha-name", "s7"}, nil
}

// haEtcd is the endpoint of the etcd S7's node uses: one started for S7
// alone, never the etcd peer, which is stopped before S3 (Execute) so that
// the monolock-only scenarios have the machine to themselves.
func (b *Run) haEtcd() (string, error) {
	if b.s7Etcd == nil {
		ep, err := peers.StartEtcd(b.srv.procs, b.clock, b.tmp, b.srv.logPath("s7-etcd"))
		if err != nil {
			return "", fmt.Errorf("S7 +ha-etcd needs etcd: %w", err)
		}
		b.s7Etcd = ep
	}
	return "http://" + b.s7Etcd.Endpoint(), nil
}
