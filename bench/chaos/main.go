// Command chaos is the chaos harness of monolock (`make chaos`).
//
// It starts bin/monolock as a child process on a free loopback port with an
// audit log, and runs many clients with random leases (tens of milliseconds to
// seconds) that take a few shared locks through fault-injecting TCP proxies
// (internal/testsupport/faultproxy). On a random schedule each proxy freezes one direction or
// both for random times — often longer than the leases, standing in for GC
// pauses and partitions —, cuts its connections, or delays bytes. In the
// middle the server is restarted (SIGTERM, wait for the exit, a new process on
// the same port, started more than a second after the last grant so that its
// clock-based tokens exceed the old ones, and no sooner than 0.8 × the longest
// lease after the exit, see below).
//
// Every holder writes to an in-memory fenced resource that keeps the highest
// token per lock and rejects smaller ones. The guarded code looks at its lock
// (Lock.Valid) before each step, then works without looking — usually a fraction of
// the lease, sometimes a pause longer than it — and writes: a loss during that
// time makes the write stale, and the proxies make such losses happen.
//
// With -store postgres or -store mariadb the resource's fence is a real
// database (internal/testsupport/fencedb, a throwaway server on a port picked
// at run time, removed at the end, on failure and on an interrupt): each
// admitted write is a transaction that runs fence.Admit and inserts one row.
// The report then adds the stale writes that landed as the database's rows
// say (a row whose token is below one that landed earlier for the lock, in
// commit order), and any is a violation.
//
// Afterwards it checks, from the audit logs of all server runs and the
// clients' and the resource's records:
//
//	(a) no two writes accepted from holders whose ownership overlapped: per
//	    lock, accepted writes carry non-decreasing tokens; each token's
//	    accepted writes come from one client grant, after the server's grant
//	    of that token, and — when the writer still believed it held the lock —
//	    decided before the server's next grant of the lock (it may land after
//	    it, in flight in a slow resource, ahead of the successor's writes);
//	(b) every stale write rejected: a write whose token is below the highest
//	    the resource had accepted is rejected, every other accepted;
//	(c) tokens strictly increase per lock, also across the restarts, in the
//	    concatenated audit logs (where granted and released alternate) and as
//	    the clients observed them (every client token is a server grant);
//	(d) no client believed it held a lock after the server's history shows it
//	    released: the client's give-up time (the first of its give-up
//	    deadline, after which Lock.Valid is false, its lock context cancelled
//	    by a loss, and its code returning) is not later than the server's
//	    release of that token plus the slack; for a hold the server expired, the client must
//	    have given up at least 0.2 × lease before the expiry (less the slack),
//	    which is what its 0.8 × lease timeout promises.
//
// The slack (-slack, default 50ms) is for scheduling, not for clocks: server
// and clients run on one machine and both stamp events with time.Now (the
// same CLOCK_REALTIME), so there is no skew. But when a proxy cuts a
// connection both ends learn of it at the same instant, and the server's
// event loop (another process) logs the release while the client's reader
// goroutine, session goroutine and the context callbacks that record the loss
// still wait for a CPU on a shared, noisy two-core machine. Heartbeat
// timeouts have a built-in margin of 0.2 × lease and need no slack.
//
// A release by shutdown is the one case where the server's history runs ahead
// of what a client can know: ERROR 0x01 cannot reach a client behind a frozen
// link, which keeps its lock until 0.8 × lease after its last confirmation.
// Nobody can be granted the lock before the next server starts, so for those
// holds the bound is the next server's start, and the harness restarts no
// sooner than 0.8 × the longest lease after the old server exited. The report
// counts how many clients heard of a shutdown late.
//
// The output ends with one line `chaos: N grants, M stale writes rejected, V
// violations` (N from the servers' audit logs); the exit status is 1 when
// V > 0, 2 when the harness itself failed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/monolock/monolock/client"
	"github.com/monolock/monolock/internal/audit"
	"github.com/monolock/monolock/internal/testsupport/faultproxy"
	"github.com/monolock/monolock/internal/testsupport/fenced"
	"github.com/monolock/monolock/internal/testsupport/fencedb"
	"github.com/monolock/monolock/internal/testsupport/proc"
)

type config struct {
	duration  time.Duration
	clients   int
	locks     int
	perProxy  int
	minLease  time.Duration
	maxLease  time.Duration
	maxPause  time.Duration
	restarts  int
	slack     time.Duration
	server    string
	build     bool
	keep      bool
	show      int
	faultSpec faultSchedule
	store     fencedb.Kind
}

func defaultDuration() time.Duration {
	if v := os.Getenv("CHAOS_DURATION"); v != "" {
		if d, err := time.ParseDuration(v); err == nil && d > 0 {
			return d
		}
		fmt.Fprintf(os.Stderr, "chaos: ignoring CHAOS_DURATION=%q (want a Go duration such as 5m)\n", v)
	}
	return 100 * time.Second
}

func parseFlags(args []string) (config, error) {
	c := config{faultSpec: faultSchedule{
		minQuiet: 500 * time.Millisecond, maxQuiet: 5 * time.Second,
		minFreeze: 20 * time.Millisecond, maxFreeze: 5 * time.Second,
		maxDelay: 150 * time.Millisecond,
	}}
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.DurationVar(&c.duration, "duration", defaultDuration(), "length of the chaos phase (env CHAOS_DURATION); setup and checks add a few seconds")
	fs.IntVar(&c.clients, "clients", 60, "client goroutines")
	fs.IntVar(&c.locks, "locks", 4, "shared lock names")
	fs.IntVar(&c.perProxy, "per-proxy", 5, "clients behind each fault proxy")
	fs.DurationVar(&c.minLease, "min-lease", 40*time.Millisecond, "shortest lease")
	fs.DurationVar(&c.maxLease, "max-lease", 3*time.Second, "longest lease")
	fs.DurationVar(&c.maxPause, "max-pause", 3*time.Second, "longest simulated pause of a holder")
	fs.IntVar(&c.restarts, "restarts", 2, "server restarts during the run")
	fs.DurationVar(&c.slack, "slack", 50*time.Millisecond, "scheduling allowance when comparing client and server timestamps")
	fs.StringVar(&c.server, "server", filepath.Join("..", "bin", "monolock"), "server binary (the default is the make build output, seen from bench/)")
	fs.BoolVar(&c.build, "build", true, "go build ./cmd/monolock of the root module into -server first")
	fs.BoolVar(&c.keep, "keep", false, "keep the audit logs and server logs (always kept when there are violations)")
	fs.IntVar(&c.show, "show", 20, "violations listed per check")
	storeFlag := fs.String("store", "memory", "where the fenced writes land: memory, postgres or mariadb")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	var err error
	if c.store, err = fencedb.ParseKind(*storeFlag); err != nil {
		return c, fmt.Errorf("-store: %w", err)
	}
	switch {
	case c.clients < 1 || c.locks < 1 || c.perProxy < 1:
		return c, errors.New("-clients, -locks and -per-proxy must be positive")
	case c.minLease < time.Millisecond || c.maxLease < c.minLease:
		return c, errors.New("want 1ms <= -min-lease <= -max-lease")
	case c.restarts < 0 || c.duration <= 0:
		return c, errors.New("-duration must be positive and -restarts not negative")
	}
	return c, nil
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "chaos: %v\n", err)
		os.Exit(2)
	}
	os.Exit(run(cfg, os.Stdout, os.Stderr))
}

// harness holds the running parts.
type harness struct {
	cfg    config
	errw   io.Writer
	dir    string
	addr   string
	t0     time.Time
	res    *Resource
	store  *fencedb.Store // nil: the resource's fence is in memory
	rec    *recorder
	faults *faultStats

	mu   sync.Mutex
	srv  *serverProc // the current server
	runs []ServerRun
}

func (h *harness) progress(format string, args ...any) {
	el := time.Duration(0)
	if !h.t0.IsZero() {
		el = time.Since(h.t0).Round(time.Second)
	}
	fmt.Fprintf(h.errw, "chaos [%6s] %s\n", el, fmt.Sprintf(format, args...))
}

func (h *harness) current() *serverProc {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.srv
}

func (h *harness) killServer() {
	if s := h.current(); s != nil {
		s.kill()
	}
}

// abort kills the server and removes the database, before an exit that
// skips the deferred calls.
func (h *harness) abort() {
	h.killServer()
	if h.store != nil {
		_ = h.store.Close()
	}
}

func run(cfg config, out, errw io.Writer) int {
	h := &harness{cfg: cfg, errw: errw, res: NewResource(), rec: newRecorder(), faults: &faultStats{}}
	dir, err := os.MkdirTemp("", "monolock-chaos-")
	if err != nil {
		fmt.Fprintf(errw, "chaos: %v\n", err)
		return 2
	}
	h.dir = dir
	if cfg.store != fencedb.Memory {
		if h.store, err = fencedb.Start(cfg.store); err != nil {
			fmt.Fprintf(errw, "chaos: starting the database: %v\n", err)
			return 2
		}
		defer h.store.Close()
		h.res = newResource(fenced.Options{Store: h.store})
	}
	fail := func(err error) int {
		h.killServer()
		fmt.Fprintf(errw, "chaos: harness failed: %v (logs in %s)\n", err, dir)
		return 2
	}

	// An interrupt or a hung phase must not leave a server behind.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		if _, ok := <-sigs; ok {
			h.abort()
			fmt.Fprintln(errw, "chaos: interrupted")
			os.Exit(130)
		}
	}()
	watchdog := time.AfterFunc(cfg.duration+3*time.Minute, func() {
		h.abort()
		fmt.Fprintf(errw, "chaos: watchdog: the run exceeded %v; aborting (logs in %s)\n", cfg.duration+3*time.Minute, dir)
		os.Exit(2)
	})
	defer watchdog.Stop()

	if cfg.build {
		h.progress("phase 1/5: go build -o %s ./cmd/monolock", cfg.server)
		if err := proc.BuildTo(cfg.server, "./cmd/monolock", errw); err != nil {
			return fail(fmt.Errorf("building the server: %w", err))
		}
	} else {
		h.progress("phase 1/5: using %s as built", cfg.server)
	}

	h.addr, err = freeLoopbackPort()
	if err != nil {
		return fail(err)
	}
	h.progress("phase 2/5: starting the server on %s (audit and server logs in %s, kept with -keep or on violations)", h.addr, dir)
	if err := h.startRun(); err != nil {
		return fail(err)
	}

	nProxies := (cfg.clients + cfg.perProxy - 1) / cfg.perProxy
	proxies := make([]*faultproxy.Proxy, nProxies)
	for i := range proxies {
		if proxies[i], err = faultproxy.New(h.addr); err != nil {
			for _, p := range proxies[:i] {
				_ = p.Close()
			}
			return fail(err)
		}
	}
	locks := make([]string, cfg.locks)
	for i := range locks {
		locks[i] = fmt.Sprintf("chaos-%d", i)
	}
	wl := &workload{locks: locks, minLease: cfg.minLease, maxLease: cfg.maxLease, maxPause: cfg.maxPause, res: h.res, rec: h.rec}

	h.t0 = time.Now()
	h.progress("phase 3/5: %d clients on %d locks through %d fault proxies for %v, %d restart(s); leases %v–%v",
		cfg.clients, cfg.locks, nProxies, cfg.duration, cfg.restarts, cfg.minLease, cfg.maxLease)
	stop, stopAll := context.WithCancel(context.Background())
	var faultsWG, workersWG sync.WaitGroup
	for _, p := range proxies {
		faultsWG.Add(1)
		go func() {
			defer faultsWG.Done()
			injectFaults(stop, p, cfg.faultSpec, h.faults)
		}()
	}
	for i := 0; i < cfg.clients; i++ {
		wk := &worker{id: i + 1, w: wl, handle: i%3 == 2,
			c: client.New(client.Config{Address: proxies[i/cfg.perProxy].Addr()})}
		workersWG.Add(1)
		go func() {
			defer workersWG.Done()
			wk.loop(stop)
		}()
	}

	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	waitUntil := func(at time.Time) {
		for {
			d := time.Until(at)
			if d <= 0 {
				return
			}
			select {
			case <-time.After(d):
				return
			case <-tick.C:
				h.status()
			}
		}
	}
	var runErr error
	for k := 1; k <= cfg.restarts && runErr == nil; k++ {
		waitUntil(h.t0.Add(cfg.duration * time.Duration(k) / time.Duration(cfg.restarts+1)))
		runErr = h.restart(k)
	}
	if runErr == nil {
		waitUntil(h.t0.Add(cfg.duration))
	}

	h.progress("phase 4/5: stopping the clients and the faults")
	stopAll()
	faultsWG.Wait()
	drained := make(chan struct{})
	go func() {
		workersWG.Wait()
		close(drained)
	}()
	var stuck string
	drainLimit := cfg.maxPause + 20*time.Second
	select {
	case <-drained:
	case <-time.After(drainLimit):
		stuck = fmt.Sprintf("clients still running %v after the stop (a Close or Do that never returns?)", drainLimit)
	}

	h.progress("phase 5/5: stopping the server, reading %d audit log(s), checking", len(h.runs)+1)
	if err := h.stopRun(); err != nil && runErr == nil {
		runErr = err
	}
	for _, p := range proxies {
		_ = p.Close()
	}
	if runErr != nil {
		return fail(runErr)
	}

	hist := History{Runs: h.runs, Grants: h.rec.snapshot(), Writes: h.res.Writes()}
	rep := Check(hist, cfg.slack)
	if stuck != "" {
		rep.Violations = append(rep.Violations, Violation{Check: "liveness", Msg: stuck})
	}
	if h.store != nil {
		if err := h.checkLanded(&rep, out); err != nil {
			return fail(err)
		}
	}
	h.report(out, rep)
	if len(rep.Violations) > 0 || cfg.keep {
		fmt.Fprintf(out, "artifacts kept in %s\n", dir)
	} else {
		_ = os.RemoveAll(dir)
	}
	fmt.Fprintf(out, "chaos: %d grants, %d stale writes rejected, %d violations\n", rep.ServerGrants, rep.StaleRejected, len(rep.Violations))
	if len(rep.Violations) > 0 {
		return 1
	}
	return 0
}

func (h *harness) status() {
	acc, rej := h.res.Counts()
	h.progress("server run %d: %d client grants, %d writes accepted, %d rejected; faults: %s",
		len(h.runs)+1, h.rec.n(), acc, rej, h.faults)
}

// startRun starts the next server on h.addr, retrying a few times in case the
// port is briefly unavailable.
func (h *harness) startRun() error {
	n := len(h.runs) + 1
	var err error
	for attempt := 0; attempt < 10; attempt++ {
		var s *serverProc
		s, err = startServer(h.cfg.server, h.addr,
			filepath.Join(h.dir, fmt.Sprintf("audit-%d.jsonl", n)), filepath.Join(h.dir, fmt.Sprintf("server-%d.log", n)))
		if err == nil {
			h.mu.Lock()
			h.srv = s
			h.mu.Unlock()
			return nil
		}
		time.Sleep(300 * time.Millisecond)
	}
	return fmt.Errorf("server run %d did not start: %w", n, err)
}

// stopRun stops the current server and records its run.
func (h *harness) stopRun() error {
	s := h.current()
	if s == nil {
		return nil // a restart failed to start one; already reported
	}
	exit := s.stop()
	f, err := os.Open(s.auditPath)
	if err != nil {
		return err
	}
	defer f.Close()
	events, err := ParseAudit(f)
	if err != nil {
		return fmt.Errorf("%s: %w", s.auditPath, err)
	}
	h.mu.Lock()
	h.runs = append(h.runs, ServerRun{StartedAt: s.startedAt, StoppedAt: s.stoppedAt, ExitedAt: s.exitedAt, Exit: exit, Events: events})
	h.srv = nil
	h.mu.Unlock()
	return nil
}

// restart stops the server and starts the next one on the same port, more
// than a second after the old one's last grant (so that the clock-based
// tokens of the new one exceed the old ones) and no sooner than 0.8 × the
// longest lease (plus the slack) after the old one exited (so that every
// client the old one held has given up, even behind a frozen link).
func (h *harness) restart(k int) error {
	h.progress("restart %d/%d: SIGTERM to the server", k, h.cfg.restarts)
	if err := h.stopRun(); err != nil {
		return err
	}
	last := h.runs[len(h.runs)-1]
	var lastGrant time.Time
	grants := 0
	for _, e := range last.Events {
		if e.Event == audit.EventGranted {
			lastGrant, grants = e.Time, grants+1
		}
	}
	notBefore := last.ExitedAt.Add(h.cfg.maxLease*4/5 + h.cfg.slack + 100*time.Millisecond)
	if g := lastGrant.Add(time.Second + 100*time.Millisecond); g.After(notBefore) {
		notBefore = g
	}
	wait := time.Until(notBefore)
	h.progress("restart %d/%d: server exited (%s) after %d grants, last at %s; new server in %v",
		k, h.cfg.restarts, orOK(last.Exit), grants, ts(lastGrant), wait.Round(time.Millisecond))
	time.Sleep(wait)
	if err := h.startRun(); err != nil {
		return err
	}
	h.progress("restart %d/%d: server run %d listening on %s", k, h.cfg.restarts, len(h.runs)+1, h.addr)
	return nil
}

func orOK(exit string) string {
	if exit == "" {
		return "status 0"
	}
	return exit
}

// report prints the summary and the violations.
func (h *harness) report(w io.Writer, r Report) {
	acc, rej := r.Accepted, r.Rejected
	fmt.Fprintf(w, "chaos summary (%v of chaos, %d clients, %d locks, %d server runs)\n", h.cfg.duration, h.cfg.clients, h.cfg.locks, r.Runs)
	fmt.Fprintf(w, "  faults injected: %s\n", h.faults)
	fmt.Fprintf(w, "  server grants %d; releases: %s; client-observed grants %d\n", r.ServerGrants, countsString(r.Releases), r.ClientGrants)
	fmt.Fprintf(w, "  client events: %s\n", countsString(h.rec.causeCounts()))
	fmt.Fprintf(w, "  writes: %d accepted, %d rejected (%d stale); %d stale write(s) accepted in the fencing window (after the next grant, before the successor's first write)\n",
		acc, rej, r.StaleRejected, r.FencingWindow)
	for _, s := range r.FencingWindowCases {
		fmt.Fprintf(w, "    - %s\n", s)
	}
	fmt.Fprintf(w, "  %d write(s) decided before the next grant landed after it, still ahead of the successor's first write (in flight in the resource), at most %v after\n",
		r.InFlight, r.MaxInFlight.Round(time.Millisecond))
	for _, s := range r.RestartTokens {
		fmt.Fprintf(w, "  %s\n", s)
	}
	fmt.Fprintf(w, "  belief (slack %v): largest client give-up after the server's release %v (%s); over %d expired holds the client gave up at least %v before the expiry, at least %v more than 0.2 × lease\n",
		h.cfg.slack, r.MaxExcess.Round(10*time.Microsecond), r.MaxExcessReason, r.ExpiredGrants,
		r.MinExpiryMargin.Round(10*time.Microsecond), r.MinExpirySpare.Round(10*time.Microsecond))
	fmt.Fprintf(w, "  lock contexts were cancelled up to %v after their give-up deadline (a late timer; Lock.Valid, checked before each write, is false from the deadline on)\n",
		r.MaxCancelLag.Round(time.Millisecond))
	fmt.Fprintf(w, "  %d holder(s) heard of a shutdown more than the slack late (link frozen or delayed; bounded by the next start instead), at most %v\n",
		r.ShutdownBeliefs, r.MaxShutdownExcess.Round(time.Millisecond))
	for _, c := range []string{checkOverlap, checkStale, checkTokens, checkBelief, checkServer, "liveness"} {
		n := r.Count(c)
		if n == 0 && (c == checkServer || c == "liveness") {
			continue
		}
		fmt.Fprintf(w, "  %-9s %d violation(s)\n", c, n)
		shown := 0
		for _, v := range r.Violations {
			if v.Check == c && shown < h.cfg.show {
				fmt.Fprintf(w, "    - %s\n", v.Msg)
				shown++
			}
		}
		if n > shown {
			fmt.Fprintf(w, "    … and %d more\n", n-shown)
		}
	}
}

func countsString(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
