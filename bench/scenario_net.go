package main

import (
	"fmt"
	"time"
)

// System names in the tables.
const (
	sysFloor    = "floor"     // S0: the bare gnet server
	sysBareGnet = "bare gnet" // S3: the same server under the heartbeat load
)

// Row keys that tie figures across scenarios.
const (
	keyEcho1   = "echo1"
	keyEchoC   = "echoC"
	keyCycleC  = "cycleC"
	keyConnC   = "connectC"
	keyCycle   = "cycle"
	keyHandovr = "handover"
)

// sleepUntil sleeps until the monotonic time t (ns).
func sleepUntil(t int64) {
	if d := time.Duration(t - mono()); d > 0 {
		time.Sleep(d)
	}
}

// timed runs a load and samples the CPU of the server (pid; 0 for none, a
// negative one for a process and its children) and of the harness from the window's
// start to the load's end; it returns a note such as "srv 97% · gen 61%
// cpu", with a warning when other work was running on the machine.
func timed(pid int, win window, run func() error) (string, error) {
	r, ok, err := timedUsage(pid, win, run)
	if !ok {
		return "", err
	}
	return usageNote(pid, r), err
}

// timedUsage is timed's measurement: the CPU of pid (when not 0) and of the
// harness over the window, in that order, and whether it could be sampled.
func timedUsage(pid int, win window, run func() error) (usageResult, bool, error) {
	errc := make(chan error, 1)
	go func() { errc <- run() }()
	sleepUntil(win.from)
	u := startUsage(pid, selfPID)
	var err error
	ended := false
	select {
	case err = <-errc: // ended early
		ended = true
	case <-time.After(time.Duration(win.until - mono())):
	}
	// Sample at the window's end, before the load closes its connections
	// (PostgreSQL's backends take their CPU time with them when they exit).
	r, ok := u.stop()
	if !ended {
		err = <-errc
	}
	return r, ok, err
}

// usageNote renders what timedUsage measured.
func usageNote(pid int, r usageResult) string {
	note := ""
	if pid != 0 && len(r.Procs) == 2 {
		note = fmt.Sprintf("srv %.0f%% · gen %.0f%% cpu", 100*r.Procs[0], 100*r.Procs[1])
	} else if len(r.Procs) > 0 {
		note = fmt.Sprintf("gen %.0f%% cpu", 100*r.Procs[len(r.Procs)-1])
	}
	if o := r.otherNote(); o != "" {
		note += " · " + o
	}
	return note
}

func summaryOf(h *Histogram) *Summary {
	s := h.Summarize()
	return &s
}

// s0 measures the floor: the bare gnet server in a child process.
func (b *bench) s0() *Scenario {
	sz := b.sz
	sc := &Scenario{ID: "S0", Name: "floor", Desc: fmt.Sprintf(
		"bare gnet server (one event loop, answers each byte with 9 bytes) in a child process; %v per row", sz.dur)}
	fl, err := b.srv.floor("s0")
	if err != nil {
		b.fail("S0: %v", err)
		sc.Add(&Row{System: sysFloor, Figure: "all", Status: "error", Note: err.Error()})
		return sc
	}
	defer fl.Stop()
	type job struct {
		figure, key string
		run         func(win window) (uint64, *Histogram, error)
	}
	echo := func(n int) func(window) (uint64, *Histogram, error) {
		return func(win window) (uint64, *Histogram, error) {
			l := &echoLoad{conns: n, win: win}
			err := runLoad(fl.addr, l)
			return l.count, &l.hist, err
		}
	}
	cycle := func(mode cycleMode) func(window) (uint64, *Histogram, error) {
		return func(win window) (uint64, *Histogram, error) {
			l := newCycleLoad(mode, sz.workers, 0, "", nil, win)
			err := runLoad(fl.addr, l)
			return l.count, &l.hist, err
		}
	}
	jobs := []job{
		{"round trips/s, 1 connection", keyEcho1, echo(1)},
		{fmt.Sprintf("round trips/s, %d connections", sz.workers), keyEchoC, echo(sz.workers)},
		{fmt.Sprintf("connect+request+close/s, C=%d", sz.workers), keyCycleC, cycle(cycleRequest)},
		{fmt.Sprintf("connect+close/s, C=%d", sz.workers), keyConnC, cycle(cycleConnect)},
	}
	for _, j := range jobs {
		b.step("S0 " + j.figure)
		win := newWindow(sz.warm, sz.dur)
		var count uint64
		var h *Histogram
		note, err := timed(fl.Pid(), win, func() error {
			var err error
			count, h, err = j.run(win)
			return err
		})
		if err != nil {
			b.fail("S0 %s: %v", j.figure, err)
			sc.Add(&Row{System: sysFloor, Figure: j.figure, Status: "error", Note: err.Error()})
			continue
		}
		sc.Add(&Row{System: sysFloor, Figure: j.figure, Value: float64(count) / win.seconds(), Unit: "/s",
			Lat: summaryOf(h), Key: j.key, Floor: j.key, Note: note})
	}
	sc.Note("latency columns: one round trip; one whole cycle (socket to close); the connect alone")
	return sc
}

// s1: C workers, each on its own lock, cycle as fast as they can.
func (b *bench) s1() *Scenario {
	sz := b.sz
	sc := &Scenario{ID: "S1", Name: "cycle", Desc: fmt.Sprintf(
		"C=%d workers, each on its own lock: monolock = dial, ACQUIRE, ACQUIRED, close; peers = lock, unlock on a kept connection; %v per system",
		sz.workers, sz.dur)}
	figure := "cycles/s"
	b.step("S1 monolock")
	func() {
		ml, err := b.srv.monolock("s1")
		if err != nil {
			b.fail("S1: %v", err)
			sc.Add(&Row{System: sysMonolock, Figure: figure, Status: "error", Note: err.Error()})
			return
		}
		defer ml.Stop()
		chk := b.checker("S1 monolock")
		win := newWindow(sz.warm, sz.dur)
		l := newCycleLoad(cycleAcquire, sz.workers, sz.holdLease, "s1", chk, win)
		note, err := timed(ml.Pid(), win, func() error { return runLoad(ml.addr, l) })
		if err != nil {
			b.fail("S1 monolock: %v", err)
			sc.Add(&Row{System: sysMonolock, Figure: figure, Status: "error", Note: err.Error()})
			return
		}
		if l.waited > 0 {
			note += fmt.Sprintf(" · %d ACQUIREs answered WAITING (previous close not yet seen)", l.waited)
		}
		sc.Add(&Row{System: sysMonolock, Figure: figure, Value: float64(l.count) / win.seconds(), Unit: "/s",
			Lat: summaryOf(&l.hist), Key: keyCycle, Floor: keyCycleC, Note: note})
	}()
	for _, p := range b.peers {
		b.step("S1 " + p.Name())
		chk := b.checker("S1 " + p.Name())
		win := newWindow(sz.warm, sz.dur)
		var res loadResult
		note, _ := timed(peerPid(p), win, func() error {
			res = peerCycle(p, sz.workers, win, chk)
			return res.err
		})
		if res.err != nil {
			b.fail("S1 %s: %v", p.Name(), res.err)
			sc.Add(&Row{System: p.Name(), Figure: figure, Status: "error", Note: res.err.Error()})
			continue
		}
		sc.Add(&Row{System: p.Name(), Figure: figure, Value: res.rate(), Unit: "/s",
			Lat: summaryOf(&res.hist), Key: keyCycle, Floor: keyCycleC, Note: note})
	}
	b.skippedRows(sc, figure)
	sc.Note("×floor: against S0 connect+request+close at the same C (monolock's cycle is that plus the lock)")
	sc.Note("monolock opens a TCP connection per cycle (a connection is the claim); the peers keep one connection per worker")
	sc.Note("Redis: SET NX PX + compare-and-delete script; etcd: concurrency.Mutex on a long-lived session; PostgreSQL: pg_advisory_lock/unlock(hashtext(name))")
	return sc
}

// s2: N workers contend for one lock; each holder releases at once.
func (b *bench) s2() *Scenario {
	sz := b.sz
	sc := &Scenario{ID: "S2", Name: "handover", Desc: fmt.Sprintf(
		"N=%d waiters on one lock; each holder releases as soon as granted and queues again; latency = holder's release → next grant; %v per system",
		sz.waiters, sz.dur)}
	figure := "handovers/s"
	b.step("S2 monolock")
	func() {
		ml, err := b.srv.monolock("s2")
		if err != nil {
			b.fail("S2: %v", err)
			sc.Add(&Row{System: sysMonolock, Figure: figure, Status: "error", Note: err.Error()})
			return
		}
		defer ml.Stop()
		chk := b.checker("S2 monolock")
		win := newWindow(sz.warm, sz.dur)
		l := newHandoverLoad(sz.waiters, "s2", sz.holdLease, chk, win)
		note, err := timed(ml.Pid(), win, func() error { return runLoad(ml.addr, l) })
		if err != nil {
			b.fail("S2 monolock: %v", err)
			sc.Add(&Row{System: sysMonolock, Figure: figure, Status: "error", Note: err.Error()})
			return
		}
		sc.Add(&Row{System: sysMonolock, Figure: figure, Value: float64(l.count) / win.seconds(), Unit: "/s",
			Lat: summaryOf(&l.hist), Key: keyHandovr, Floor: keyEcho1, Note: note})
	}()
	for _, p := range b.peers {
		b.step("S2 " + p.Name())
		chk := b.checker("S2 " + p.Name())
		win := newWindow(sz.warm, sz.dur)
		var res loadResult
		note, _ := timed(peerPid(p), win, func() error {
			res = peerHandover(p, sz.waiters, "s2", win, chk)
			return res.err
		})
		if res.err != nil {
			b.fail("S2 %s: %v", p.Name(), res.err)
			sc.Add(&Row{System: p.Name(), Figure: figure, Status: "error", Note: res.err.Error()})
			continue
		}
		sc.Add(&Row{System: p.Name(), Figure: figure, Value: res.rate(), Unit: "/s",
			Lat: summaryOf(&res.hist), Key: keyHandovr, Floor: keyEcho1, Note: note})
	}
	b.skippedRows(sc, figure)
	sc.Note("×floor: against S0's round trips/s on 1 connection (a handover is a close one way and a grant the other)")
	if r, ok := b.redisRetry(); ok {
		sc.Note("Redis waiters poll with SET NX after a random %v–%v pause (no queue, no push)", r, 2*r)
	}
	return sc
}

// peerPid is the peer's server process for CPU sampling; for PostgreSQL,
// whose work is spread over a backend per connection, the negated pid of
// the postmaster (it and its children are summed).
func peerPid(p peer) int {
	switch p := p.(type) {
	case *redisPeer:
		return p.proc.Pid()
	case *etcdPeer:
		return p.proc.Pid()
	case *pgPeer:
		return -p.proc.Pid() // the postmaster and its backends
	}
	return 0
}
