package scenario

import (
	"fmt"
	"github.com/monolock/monolock/bench/check"
	"github.com/monolock/monolock/bench/clock"
	"github.com/monolock/monolock/bench/hist"
	"github.com/monolock/monolock/bench/peers"
	"github.com/monolock/monolock/bench/procstat"
	"github.com/monolock/monolock/bench/report"
	"os"
	"time"
)

// timed runs a load and samples the CPU of the server (pid; 0 for none, a
// negative one for a process and its children) and of the harness from the window's
// start to the load's end; it returns a note such as "srv 97% · gen 61%
// cpu", with a warning when other work was running on the machine.
func timed(clk clock.Clock, pid int, win clock.Window, run func() error) (string, error) {
	r, ok, err := timedUsage(clk, pid, win, run)
	if !ok {
		return "", err
	}
	return usageNote(pid, r), err
}

// timedUsage is timed's measurement: the CPU of pid (when not 0) and of the
// harness over the window, in that order, and whether it could be sampled.
func timedUsage(clk clock.Clock, pid int, win clock.Window, run func() error) (procstat.UsageResult, bool, error) {
	errc := make(chan error, 1)
	go func() { errc <- run() }()
	clk.SleepUntil(win.From)
	u := procstat.StartUsage(pid, os.Getpid())
	var err error
	ended := false
	select {
	case err = <-errc: // ended early
		ended = true
	case <-time.After(time.Duration(win.Until - clk.Now())):
	}
	// Sample at the window's end, before the load closes its connections
	// (PostgreSQL's backends take their CPU time with them when they exit).
	r, ok := u.Stop()
	if !ended {
		err = <-errc
	}
	return r, ok, err
}

// usageNote renders what timedUsage measured.
func usageNote(pid int, r procstat.UsageResult) string {
	note := ""
	if pid != 0 && len(r.Procs) == 2 {
		note = fmt.Sprintf("srv %.0f%% · gen %.0f%% cpu", 100*r.Procs[0], 100*r.Procs[1])
	} else if len(r.Procs) > 0 {
		note = fmt.Sprintf("gen %.0f%% cpu", 100*r.Procs[len(r.Procs)-1])
	}
	if o := r.OtherNote(); o != "" {
		note += " · " + o
	}
	return note
}

func summaryOf(h *hist.Histogram) *hist.Summary {
	s := h.Summarize()
	return &s
}

// s0 measures the floor: the bare gnet server in a child process.
func (b *Run) s0() *report.Scenario {
	sz := b.sz
	sc := &report.Scenario{ID: "S0", Name: "floor", Desc: fmt.Sprintf(
		"bare gnet server (one event loop, answers each byte with 9 bytes) in a child process; %v per row", sz.dur)}
	fl, err := b.srv.floor("s0")
	if err != nil {
		b.failRow(sc, report.SysFloor, "all", "S0", err)
		return sc
	}
	defer fl.Stop()
	type job struct {
		figure, key string
		run         func(win clock.Window) (uint64, *hist.Histogram, error)
	}
	echo := func(n int) func(clock.Window) (uint64, *hist.Histogram, error) {
		return func(win clock.Window) (uint64, *hist.Histogram, error) {
			l := &echoLoad{conns: n, win: win}
			err := runLoad(b.clock, fl.Addr, l)
			return l.count, &l.hist, err
		}
	}
	cycle := func(mode cycleMode) func(clock.Window) (uint64, *hist.Histogram, error) {
		return func(win clock.Window) (uint64, *hist.Histogram, error) {
			l := newCycleLoad(mode, sz.workers, 0, "", nil, win)
			err := runLoad(b.clock, fl.Addr, l)
			return l.count, &l.hist, err
		}
	}
	jobs := []job{
		{"round trips/s, 1 connection", report.KeyEcho1, echo(1)},
		{fmt.Sprintf("round trips/s, %d connections", sz.workers), report.KeyEchoC, echo(sz.workers)},
		{fmt.Sprintf("connect+request+close/s, C=%d", sz.workers), report.KeyCycleC, cycle(cycleRequest)},
		{fmt.Sprintf("connect+close/s, C=%d", sz.workers), report.KeyConnC, cycle(cycleConnect)},
	}
	for _, j := range jobs {
		b.step("S0 " + j.figure)
		win := b.clock.Window(sz.warm, sz.dur)
		var count uint64
		var h *hist.Histogram
		note, err := timed(b.clock, fl.Pid(), win, func() error {
			var err error
			count, h, err = j.run(win)
			return err
		})
		if err != nil {
			b.failRow(sc, report.SysFloor, j.figure, "S0 "+j.figure, err)
			continue
		}
		sc.Add(&report.Row{System: report.SysFloor, Figure: j.figure, Value: float64(count) / win.Seconds(), Unit: "/s",
			Lat: summaryOf(h), Key: j.key, Floor: j.key, Note: note})
	}
	sc.Note("latency columns: one round trip; one whole cycle (socket to close); the connect alone")
	return sc
}

// monolockAndPeerRates adds sc's rows of figure for monolock (a server
// started as srvName) and then for each peer: each system runs its load over
// one window, with its server's CPU sampled, and its row's value is the
// rate. onMonolock may return a remark for the row's note. key and floor tie
// the rows to other scenarios' figures.
func (b *Run) monolockAndPeerRates(sc *report.Scenario, srvName, figure, key, floor string,
	onMonolock func(addr string, win clock.Window, chk *check.Checker) (res peers.Result, remark string),
	onPeer func(p peers.Peer, win clock.Window, chk *check.Checker) peers.Result) {
	b.step(sc.ID + " " + report.SysMonolock)
	func() {
		ml, err := b.srv.monolock(srvName)
		if err != nil {
			b.failRow(sc, report.SysMonolock, figure, sc.ID, err)
			return
		}
		defer ml.Stop()
		b.rateRow(sc, report.SysMonolock, ml.Pid(), figure, key, floor, func(win clock.Window, chk *check.Checker) (peers.Result, string) {
			return onMonolock(ml.Addr, win, chk)
		})
	}()
	for _, p := range b.peers {
		b.step(sc.ID + " " + p.Name())
		b.rateRow(sc, p.Name(), peers.PID(p), figure, key, floor, func(win clock.Window, chk *check.Checker) (peers.Result, string) {
			return onPeer(p, win, chk), ""
		})
	}
	b.skippedRows(sc, figure)
}

// rateRow runs sys's load over a new window, sampling the CPU of its server
// (pid, as timed takes it), and adds its row to sc.
func (b *Run) rateRow(sc *report.Scenario, sys string, pid int, figure, key, floor string, run func(win clock.Window, chk *check.Checker) (peers.Result, string)) {
	chk := b.checker(sc.ID + " " + sys)
	win := b.clock.Window(b.sz.warm, b.sz.dur)
	var res peers.Result
	var remark string
	note, _ := timed(b.clock, pid, win, func() error {
		res, remark = run(win, chk)
		return res.Err
	})
	if res.Err != nil {
		b.failRow(sc, sys, figure, sc.ID+" "+sys, res.Err)
		return
	}
	sc.Add(&report.Row{System: sys, Figure: figure, Value: res.Rate(), Unit: "/s",
		Lat: summaryOf(&res.Hist), Key: key, Floor: floor, Note: note + remark})
}

// s1: C workers, each on its own lock, cycle as fast as they can.
func (b *Run) s1() *report.Scenario {
	sz := b.sz
	sc := &report.Scenario{ID: "S1", Name: "cycle", Desc: fmt.Sprintf(
		"C=%d workers, each on its own lock: monolock = dial, ACQUIRE, ACQUIRED, close; peers = lock, unlock on a kept connection; %v per system",
		sz.workers, sz.dur)}
	b.monolockAndPeerRates(sc, "s1", "cycles/s", report.KeyCycle, report.KeyCycleC,
		func(addr string, win clock.Window, chk *check.Checker) (peers.Result, string) {
			l := newCycleLoad(cycleAcquire, sz.workers, sz.holdLease, "s1", chk, win)
			err := runLoad(b.clock, addr, l)
			res := peers.Result{Count: l.count, Hist: l.hist, Secs: win.Seconds(), Err: err}
			if l.waited > 0 {
				return res, fmt.Sprintf(" · %d ACQUIREs answered WAITING (previous close not yet seen)", l.waited)
			}
			return res, ""
		},
		func(p peers.Peer, win clock.Window, chk *check.Checker) peers.Result {
			return peers.Cycle(p, b.clock, sz.workers, win, chk)
		})
	b.cycleCPURows(sc)
	sc.Note("×floor: against S0 connect+request+close at the same C (monolock's cycle is that plus the lock)")
	sc.Note("monolock opens a TCP connection per cycle (a connection is the claim); the peers keep one connection per worker")
	sc.Note("Redis: SET NX PX + compare-and-delete script; etcd: concurrency.Mutex on a long-lived session; PostgreSQL: pg_advisory_lock/unlock(hashtext(name))")
	return sc
}

// s2: N workers contend for one lock; each holder releases at once.
func (b *Run) s2() *report.Scenario {
	sz := b.sz
	sc := &report.Scenario{ID: "S2", Name: "handover", Desc: fmt.Sprintf(
		"N=%d waiters on one lock; each holder releases as soon as granted and queues again; latency = holder's release → next grant; %v per system",
		sz.waiters, sz.dur)}
	b.monolockAndPeerRates(sc, "s2", "handovers/s", report.KeyHandovr, report.KeyEcho1,
		func(addr string, win clock.Window, chk *check.Checker) (peers.Result, string) {
			l := newHandoverLoad(sz.waiters, "s2", sz.holdLease, chk, win)
			err := runLoad(b.clock, addr, l)
			return peers.Result{Count: l.count, Hist: l.hist, Secs: win.Seconds(), Err: err}, ""
		},
		func(p peers.Peer, win clock.Window, chk *check.Checker) peers.Result {
			return peers.Handover(p, b.clock, sz.waiters, "s2", win, chk)
		})
	sc.Note("×floor: against S0's round trips/s on 1 connection (a handover is a close one way and a grant the other)")
	if r, ok := b.redisRetry(); ok {
		sc.Note("Redis waiters poll with SET NX after a random %v–%v pause (no queue, no push)", r, 2*r)
	}
	return sc
}
