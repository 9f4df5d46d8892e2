package conformance

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/monolock/monolock/internal/testsupport/proc"
)

// safety bounds every wait for something that should happen: it is a net
// against a hung client, never a timing judgement.
const safety = 10 * time.Second

// Scenario is one check of one rule.
type Scenario struct {
	Name string
	// Rule is the rule of docs/protocol.md the scenario checks.
	Rule string
	// Server: the scenario needs a real monolock binary (Config.Server).
	Server bool
	// Attempts is how many runs a failure takes before it counts (one when
	// zero). Only a scenario that a loaded machine can fail but never pass
	// has more: a lease so short that the kit's own answers can be starved
	// past the client's give-up, or a gap that load only lengthens. A client
	// that breaks the rule fails every run, one that was starved passes the
	// next, and the pass says that an earlier run failed. (Where load can
	// also make a broken client pass, as with the intervals of
	// heartbeat-rtt, a second run would only be a second chance for it.)
	Attempts int
	// Needs is an optional part of the driver contract the scenario uses
	// (a Feature* constant); "" when it needs none.
	Needs string
	run   func(e *Env)
}

// Config says which client to judge and with what.
type Config struct {
	// Drivers are every client's driver; Drivers[0] is the reference, which
	// plays the other parties of end-to-end scenarios.
	Drivers []Driver
	// Judge is the driver whose client is judged.
	Judge Driver
	// Server is a monolock binary for the end-to-end scenarios ("" skips them).
	Server string
}

// Result is one scenario's outcome.
type Result struct {
	Scenario Scenario
	// Err is the failure: the rule broken and what was seen; nil when passed.
	Err error
	// Skipped says why the scenario did not run.
	Skipped string
	// Diagnostics are the drivers' stderr and stray output, on failure.
	Diagnostics string
	// Retried are the failures of the runs before the one reported.
	Retried []error
}

func (r Result) String() string {
	switch {
	case r.Skipped != "":
		return fmt.Sprintf("SKIP %s: %s", r.Scenario.Name, r.Skipped)
	case r.Err != nil:
		return fmt.Sprintf("FAIL %s (%s): %v", r.Scenario.Name, r.Scenario.Rule, r.Err)
	case len(r.Retried) > 0:
		return fmt.Sprintf("PASS %s (run %d of at most %d; the earlier failed: %v)", r.Scenario.Name, len(r.Retried)+1, r.Scenario.Attempts, errors.Join(r.Retried...))
	}
	return "PASS " + r.Scenario.Name
}

// failure ends a scenario (Env.Failf panics with it; Run recovers it).
type failure struct{ err error }

// Env is what a scenario runs with; it owns every process, listener and
// server the scenario starts and ends them all afterwards.
type Env struct {
	cfg     Config
	procs   []*Process
	fakes   []*FakeServer
	servers []*proc.Process
	tls     *tlsSetup // set by overTLS: fakes speak TLS, drivers get its files
	dirs    []string  // temporary directories, removed at the end
}

// Run runs one scenario, again after a failure while it has Attempts left.
func Run(sc Scenario, cfg Config) Result {
	var retried []error
	for {
		res := runOnce(sc, cfg)
		if res.Err == nil || len(retried)+1 >= sc.Attempts {
			res.Retried = retried
			return res
		}
		retried = append(retried, res.Err)
	}
}

// runOnce runs one scenario once.
func runOnce(sc Scenario, cfg Config) (res Result) {
	res.Scenario = sc
	if sc.Server && cfg.Server == "" {
		res.Skipped = "needs a monolock binary (-server)"
		return res
	}
	if sc.Needs != "" && !cfg.Judge.Supported(sc.Needs) {
		res.Skipped = fmt.Sprintf("not supported: driver %s does not announce %q (-supports %s=%s)", cfg.Judge.Name, sc.Needs, cfg.Judge.Name, sc.Needs)
		return res
	}
	e := &Env{cfg: cfg}
	defer func() {
		v := recover()
		e.cleanup()
		if v != nil {
			f, ok := v.(failure)
			if !ok {
				panic(v) // a bug in the kit, after every process is gone
			}
			res.Err = f.err
		}
		if res.Err == nil {
			res.Err = e.wireViolations()
		}
		if res.Err != nil {
			res.Diagnostics = e.diagnostics()
		}
	}()
	sc.run(e)
	return res
}

func (e *Env) cleanup() {
	for _, p := range e.procs {
		p.Close()
	}
	for _, f := range e.fakes {
		f.Close()
	}
	for _, s := range e.servers {
		s.Kill()
	}
	for _, d := range e.dirs {
		_ = os.RemoveAll(d)
	}
}

// wireViolations are the invariants broken on any connection of the fake
// servers, checked for every scripted scenario.
func (e *Env) wireViolations() error {
	var all []string
	for _, f := range e.fakes {
		f.mu.Lock()
		conns := append([]*ServerConn(nil), f.all...)
		f.mu.Unlock()
		for i, c := range conns {
			for _, v := range c.Violations() {
				all = append(all, fmt.Sprintf("connection %d: %s", i+1, v))
			}
		}
	}
	if len(all) == 0 {
		return nil
	}
	return errors.New(strings.Join(all, "; "))
}

func (e *Env) diagnostics() string {
	var b strings.Builder
	for _, p := range e.procs {
		b.WriteString(p.Diagnostics())
	}
	return b.String()
}

// Failf fails the scenario: rule is the rule broken, the rest what was seen.
func (e *Env) Failf(rule, format string, args ...any) {
	panic(failure{fmt.Errorf("%s: %s", rule, fmt.Sprintf(format, args...))})
}

// must fails the scenario on err, which says what did not happen.
func (e *Env) must(rule string, err error) {
	if err != nil {
		e.Failf(rule, "%v", err)
	}
}

// Fake starts a fake server for the scenario, speaking TLS in a TLS
// scenario.
func (e *Env) Fake() *FakeServer {
	var cfg *tls.Config
	if e.tls != nil {
		cfg = e.tls.server
	}
	f, err := Listen(cfg)
	e.must("kit", err)
	e.fakes = append(e.fakes, f)
	return f
}

// Start starts driver d with req.
func (e *Env) Start(d Driver, label string, req Request) *Process {
	p, err := Start(d, label, req)
	e.must("driver", err)
	e.procs = append(e.procs, p)
	return p
}

// StartJudged starts the judged client's driver; in a TLS scenario the
// request carries the scenario's TLS files unless it has its own.
func (e *Env) StartJudged(req Request) *Process {
	if e.tls != nil && req.TLS == nil {
		req.TLS = &e.tls.client
	}
	return e.Start(e.cfg.Judge, e.cfg.Judge.Name, req)
}

// Server starts a real monolock server with extra arguments.
func (e *Env) Server(args ...string) *proc.Process {
	s, err := proc.Monolock(e.cfg.Server, proc.Options{Args: args})
	e.must("kit: start monolock", err)
	e.servers = append(e.servers, s)
	return s
}

// expect is Process.Expect that fails the scenario.
func (e *Env) expect(rule string, p *Process, kind string, timeout time.Duration) Event {
	ev, err := p.Expect(kind, timeout)
	e.must(rule, err)
	return ev
}

// between fails unless lo <= d <= hi.
func (e *Env) between(rule, what string, d, lo, hi time.Duration) {
	if d < lo || d > hi {
		e.Failf(rule, "%s was %v, want between %v and %v", what, d.Round(time.Millisecond), lo, hi)
	}
}

// Scenarios is every scenario, in the order of docs/conformance.md.
func Scenarios() []Scenario {
	var all []Scenario
	all = append(all, framingScenarios()...)
	all = append(all, releaseScenarios()...)
	all = append(all, heartbeatScenarios()...)
	all = append(all, lateAnswerScenarios()...)
	all = append(all, giveUpScenarios()...)
	all = append(all, errorScenarios()...)
	all = append(all, tlsScenarios()...)
	all = append(all, failoverScenarios()...)
	all = append(all, e2eScenarios()...)
	return all
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
