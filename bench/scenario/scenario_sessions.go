package scenario

import (
	"errors"
	"fmt"
	"github.com/monolock/monolock/bench/check"
	"github.com/monolock/monolock/bench/clock"
	"github.com/monolock/monolock/bench/hist"
	"github.com/monolock/monolock/bench/procstat"
	"github.com/monolock/monolock/bench/report"
	"github.com/monolock/monolock/internal/testsupport/proc"
	"os"
	"slices"
	"strings"
	"time"
)

// sessionsResult is one S3 run.
type sessionsResult struct {
	sessions      int
	setup         time.Duration // until every session had its first answer
	rssBefore     int64
	rssAfter      int64
	anonBefore    int64
	anonAfter     int64
	fdsBefore     int           // the server's open descriptors when idle
	fdsAfter      int           // and with every session open
	cpu           time.Duration // server CPU over the window
	genCPU        time.Duration // harness CPU over the window
	windowSecs    float64
	heartbeats    uint64 // answered inside the window
	rtt           hist.Histogram
	late          uint64
	promoted      uint64
	heartbeatRate float64
	other         string // a warning about foreign load, if any
}

// fdsPerSession is the server's descriptors added per session.
func (r sessionsResult) fdsPerSession() float64 {
	return float64(r.fdsAfter-r.fdsBefore) / float64(r.sessions)
}

func (r sessionsResult) rssPerSession() float64 {
	return float64(r.rssAfter-r.rssBefore) / float64(r.sessions)
}

// cpuPerMillion is server CPU-seconds per million heartbeats.
func (r sessionsResult) cpuPerMillion() float64 {
	if r.heartbeats == 0 {
		return 0
	}
	return r.cpu.Seconds() / float64(r.heartbeats) * 1e6
}

// sampleIdleServer records the RSS of srv, once it has finished starting,
// as res's "before".
func sampleIdleServer(srv *proc.Process, res *sessionsResult) error {
	time.Sleep(100 * time.Millisecond) // let the server finish starting
	before, err := procstat.Read(srv.Pid())
	if err != nil {
		return err
	}
	res.rssBefore, res.anonBefore = before.RSS, before.RSSAnon
	res.fdsBefore, err = procstat.OpenDescriptors(srv.Pid())
	return err
}

// measureHeartbeatWindow opens t's window for win and measures the server's
// and the harness's CPU over it, samples the server's RSS at its end, then
// stops the load (stop) and fills res with all that and t's counts.
func measureHeartbeatWindow(clk clock.Clock, srv *proc.Process, t *heartbeatTally, stop func() error, win time.Duration, res *sessionsResult) error {
	u := procstat.StartUsage(srv.Pid(), os.Getpid())
	from := clk.Now()
	t.until.Store(from + int64(win))
	t.from.Store(from)
	clk.SleepUntil(from + int64(win))
	use, ok := u.Stop()
	z, err := procstat.Read(srv.Pid())
	if err == nil {
		res.fdsAfter, err = procstat.OpenDescriptors(srv.Pid())
	}
	stopErr := stop()
	if err != nil {
		return err
	}
	if stopErr != nil {
		return stopErr
	}
	if !srv.Alive() {
		return errExited
	}
	if !ok || len(use.CPU) != 2 {
		return errors.New("could not sample the CPU")
	}
	res.rssAfter, res.anonAfter = z.RSS, z.RSSAnon
	res.cpu, res.genCPU = use.CPU[0], use.CPU[1]
	res.windowSecs = use.Wall.Seconds()
	res.other = use.OtherNote()
	res.heartbeats = t.hbWindow
	res.heartbeatRate = float64(t.hbWindow) / win.Seconds()
	res.rtt = t.hist
	res.late = t.late
	res.promoted = t.promoted
	return nil
}

// measureSessions runs the S3 load against srv: it samples the idle server,
// opens every session, lets them heartbeat for warm, then measures CPU and
// heartbeats over window and samples RSS at its end.
func measureSessions(clk clock.Clock, srv *proc.Process, monolock bool, sessions int, lease, warm, win time.Duration, chk *check.Checker) (sessionsResult, error) {
	res := sessionsResult{sessions: sessions}
	if err := sampleIdleServer(srv, &res); err != nil {
		return res, err
	}
	l := newSessionsLoad(monolock, sessions, lease, chk)
	run, setup, err := startLoadWhenReady(clk, srv.Addr, l, &l.allReady, sessions, 5*time.Millisecond, "sessions not all answered")
	if err != nil {
		return res, err
	}
	res.setup = setup
	time.Sleep(warm)
	err = measureHeartbeatWindow(clk, srv, &l.heartbeatTally, run.Stop, win, &res)
	return res, err
}

// s3: many heartbeating sessions; server RSS and CPU from /proc. The core
// comparison (monolock against the bare gnet server at the same sessions
// and rate) alternates the two s3Pairs times and reports medians, so that a
// burst of foreign load on the machine does not land on one side only.
func (b *Run) s3() *report.Scenario {
	sz := b.sz
	sc := &report.Scenario{ID: "S3", Name: "sessions", Desc: fmt.Sprintf(
		"S sessions, half holders and half waiters (one holder and one waiter per lock), heartbeating every %v (lease %v); %v measured after %v",
		sz.s3Lease/4, sz.s3Lease, sz.s3Window, sz.s3Warm)}
	one := func(sys string, sessions int, monolock bool, rep int) (sessionsResult, bool) {
		tag := fmt.Sprintf("%s %s sessions", sys, report.GroupThousands(int64(sessions)))
		if rep > 0 {
			tag += fmt.Sprintf(" (run %d)", rep)
		}
		b.step("S3 " + tag)
		var srv *proc.Process
		var err error
		if monolock {
			srv, err = b.srv.monolock(fmt.Sprintf("s3-%d", sessions))
		} else {
			srv, err = b.srv.floor(fmt.Sprintf("s3-%d", sessions))
		}
		if err == nil {
			defer srv.Stop()
			var r sessionsResult
			r, err = measureSessions(b.clock, srv, monolock, sessions, sz.s3Lease, sz.s3Warm, sz.s3Window, b.checker("S3 "+tag))
			if err == nil {
				return r, true
			}
		}
		b.failRow(sc, sys, "sessions "+report.GroupThousands(int64(sessions)), "S3 "+tag, err)
		return sessionsResult{}, false
	}
	var gnetRuns, monoRuns []sessionsResult
	for rep := range sz.s3Pairs {
		n := rep + 1
		if sz.s3Pairs == 1 {
			n = 0
		}
		if r, ok := one(report.SysBareGnet, sz.s3Floor, false, n); ok {
			gnetRuns = append(gnetRuns, r)
		}
		if r, ok := one(report.SysMonolock, sz.s3Floor, true, n); ok {
			monoRuns = append(monoRuns, r)
		}
	}
	b.addSessionRows(sc, report.SysBareGnet, gnetRuns, true)
	b.addSessionRows(sc, report.SysMonolock, monoRuns, true)
	// The same sessions without heartbeats: what an open session costs at rest.
	idleWin := max(sz.s3Window/2, time.Second)
	for _, sys := range []string{report.SysBareGnet, report.SysMonolock} {
		tag := fmt.Sprintf("%s %s idle sessions", sys, report.GroupThousands(int64(sz.s3Floor)))
		b.step("S3 " + tag)
		r, err := b.idleSessions(sys == report.SysMonolock, sz.s3Floor, idleWin, tag)
		figure := "idle CPU @" + report.GroupThousands(int64(sz.s3Floor))
		if err != nil {
			b.failRow(sc, sys, figure, "S3 "+tag, err)
			continue
		}
		note := fmt.Sprintf("%s sessions open, none heartbeating during %v", report.GroupThousands(int64(sz.s3Floor)), idleWin)
		if r.other != "" {
			note += " · " + r.other
		}
		sc.Add(&report.Row{System: sys, Figure: figure, Value: 100 * r.cpu.Seconds() / r.windowSecs, Unit: "% of a core",
			Key: "idle" + figure, Floor: "idle" + figure, Lower: true, Note: note})
	}
	for _, n := range sz.s3Sessions {
		if n == sz.s3Floor {
			continue
		}
		// The floor at every size: the generator and the kernel shape the
		// round trips at large sizes as much as the server does.
		if r, ok := one(report.SysBareGnet, n, false, 0); ok {
			b.addSessionRows(sc, report.SysBareGnet, []sessionsResult{r}, false)
		}
		if r, ok := one(report.SysMonolock, n, true, 0); ok {
			b.addSessionRows(sc, report.SysMonolock, []sessionsResult{r}, false)
		}
	}
	if len(monoRuns) > 0 {
		c := &b.report.Core
		c.Sessions = sz.s3Floor
		c.RSSPerSessionBytes = medianOf(monoRuns, sessionsResult.rssPerSession)
		c.CPUPerMHbMonolock = medianOf(monoRuns, sessionsResult.cpuPerMillion)
		if len(gnetRuns) > 0 {
			c.CPUPerMHbFloor = medianOf(gnetRuns, sessionsResult.cpuPerMillion)
			c.CPUPerHeartbeatRatio = c.CPUPerMHbMonolock / c.CPUPerMHbFloor
		}
	}
	sc.Note("RSS per session = (server VmRSS with every session open − VmRSS of the idle server) ÷ S, sampled at the window's end, so it includes heap garbage not yet collected (a Go heap is collected when it grows by GOGC percent of its live size: monolock sets GOGC=25, bare gnet runs at Go's default 100)")
	sc.Note("CPU = the server's utime+stime (per-thread schedstat) over the window ÷ heartbeats answered in it; bare gnet: gnet with monolock's options, answering each byte with 9 bytes; ×floor on RSS and CPU rows compares with it")
	if sz.s3Pairs > 1 {
		sc.Note("@%s: %d alternating runs of each server, medians shown (every run listed in the note)", report.GroupThousands(int64(sz.s3Floor)), sz.s3Pairs)
	}
	sc.Note("descriptor limit %d: the largest S here is %s", b.report.Limits.NoFileSoft, report.GroupThousands(int64(b.report.Limits.MaxSessions)))
	return sc
}

// idleSessions opens sessions with a lease so long that none heartbeats
// during the window, and measures the server's CPU at rest.
func (b *Run) idleSessions(monolock bool, sessions int, win time.Duration, tag string) (sessionsResult, error) {
	var srv *proc.Process
	var err error
	if monolock {
		srv, err = b.srv.monolock("s3-idle")
	} else {
		srv, err = b.srv.floor("s3-idle")
	}
	if err != nil {
		return sessionsResult{}, err
	}
	defer srv.Stop()
	return measureSessions(b.clock, srv, monolock, sessions, time.Hour, 500*time.Millisecond, win, b.checker("S3 "+tag))
}

// addSessionRows adds the RSS, CPU and RTT rows of one system at one size
// from one or more runs (medians; RTT histograms merged).
func (b *Run) addSessionRows(sc *report.Scenario, sys string, runs []sessionsResult, isFloorSize bool) {
	if len(runs) == 0 {
		return
	}
	sessions := runs[0].sessions
	at := " @" + report.GroupThousands(int64(sessions))
	unit := "B/session"
	if sys == report.SysBareGnet {
		unit = "B/connection"
	}
	rss, cpu := addRSSAndCPURows(sc, sys, runs, at, unit, at)
	mid := runs[len(runs)/2]
	if isFloorSize {
		rss.Floor, cpu.Floor = rss.Key, cpu.Key
	}
	var rtt hist.Histogram
	var late, promoted uint64
	for _, r := range runs {
		rtt.Merge(&r.rtt)
		late += r.late
		promoted += r.promoted
	}
	note := fmt.Sprintf("setup %v", mid.setup.Round(time.Millisecond))
	if late > 0 {
		note += fmt.Sprintf(" · %d heartbeats sent late (previous reply later than the interval)", late)
	}
	if promoted > 0 {
		note += fmt.Sprintf(" · %d waiters promoted (holders dropped)", promoted)
	}
	sc.Add(&report.Row{System: sys, Figure: "heartbeat RTT" + at, Value: medianOf(runs, func(r sessionsResult) float64 { return r.heartbeatRate }),
		Unit: "hb/s", Lat: summaryOf(&rtt), Key: "rtt" + at, Note: note})
}

// addRSSAndCPURows adds sys's rows of RSS per session and of CPU per
// heartbeat from runs: medians, every run's figure in the note when there
// are several, and the middle run's detail. keyAt ends both rows' keys.
func addRSSAndCPURows(sc *report.Scenario, sys string, runs []sessionsResult, at, unit, keyAt string) (rss, cpu *report.Row) {
	list := func(f func(sessionsResult) float64, format string) string { return runsList(runs, f, format) }
	warn := ""
	if w := otherLoadWarnings(runs, func(r sessionsResult) string { return r.other }); w != "" {
		warn = " · " + w
	}
	mid := runs[len(runs)/2]
	rss = sc.Add(&report.Row{System: sys, Figure: "RSS per session" + at, Value: medianOf(runs, sessionsResult.rssPerSession), Unit: unit,
		Key: "rss" + keyAt, Lower: true,
		Note: list(sessionsResult.rssPerSession, "%.0f") + fmt.Sprintf("RSS %s → %s (anon %s → %s)",
			mib(mid.rssBefore), mib(mid.rssAfter), mib(mid.anonBefore), mib(mid.anonAfter))})
	cpu = sc.Add(&report.Row{System: sys, Figure: "CPU per 1M heartbeats" + at, Value: medianOf(runs, sessionsResult.cpuPerMillion), Unit: "s",
		Key: "cpu" + keyAt, Lower: true,
		Note: list(sessionsResult.cpuPerMillion, "%.2f") + fmt.Sprintf("srv %.1f%% · gen %.0f%% cpu",
			100*mid.cpu.Seconds()/mid.windowSecs, 100*mid.genCPU.Seconds()/mid.windowSecs) + warn})
	return rss, cpu
}

// otherLoadWarnings joins the runs' warnings (warning, "" for none) with
// "; ".
func otherLoadWarnings[T any](runs []T, warning func(T) string) string {
	var ws []string
	for _, r := range runs {
		if w := warning(r); w != "" {
			ws = append(ws, w)
		}
	}
	return strings.Join(ws, "; ")
}

// medianOf is the median of f over runs.
func medianOf[T any](runs []T, f func(T) float64) float64 {
	vs := make([]float64, len(runs))
	for i, r := range runs {
		vs[i] = f(r)
	}
	slices.Sort(vs)
	n := len(vs)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return vs[n/2]
	}
	return (vs[n/2-1] + vs[n/2]) / 2
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
