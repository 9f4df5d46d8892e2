package scenario

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/monolock/monolock/bench/check"
	"github.com/monolock/monolock/bench/clock"
	"github.com/monolock/monolock/bench/hist"
	"github.com/monolock/monolock/bench/procstat"
	"github.com/monolock/monolock/bench/report"
	"github.com/monolock/monolock/internal/certs/certstest"
	"github.com/monolock/monolock/internal/testsupport/proc"
)

// tlsMode is one server configuration of S6.
type tlsMode uint8

const (
	modePlain tlsMode = iota // no TLS
	modeTLS                  // -tls-cert, -tls-key
	modeMTLS                 // and -tls-client-ca: the client presents a certificate
)

var tlsModes = []tlsMode{modePlain, modeTLS, modeMTLS}

// System names of S6's rows; the plain server is "monolock", so the
// ×monolock column is the ratio to plain.
func (m tlsMode) system() string {
	switch m {
	case modeTLS:
		return "monolock TLS"
	case modeMTLS:
		return "monolock mTLS"
	}
	return report.SysMonolock
}

func (m tlsMode) tag() string { return [...]string{"plain", "tls", "mtls"}[m] }

// tlsServerArgs are the server flags of mode with the PKI's files.
func tlsServerArgs(m tlsMode, p *certstest.PKI) []string {
	switch m {
	case modeTLS:
		return []string{"-tls-cert", p.Server.Cert, "-tls-key", p.Server.Key}
	case modeMTLS:
		return []string{"-tls-cert", p.Server.Cert, "-tls-key", p.Server.Key, "-tls-client-ca", p.CA}
	}
	return nil
}

// tlsClientConfig is the client side of mode: nil for plain TCP; for mTLS
// the client presents a certificate with a URI SAN.
func tlsClientConfig(m tlsMode, p *certstest.PKI) *tls.Config {
	switch m {
	case modeTLS:
		return p.ClientTLS("")
	case modeMTLS:
		return p.ClientTLS(certstest.ClientURI)
	}
	return nil
}

// rotation is the order of n alternatives in run rep: each run starts one
// further along, so that no alternative always comes first (after a server
// stop, with a cold cache) or last.
func rotation(n, rep int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = (rep + i) % n
	}
	return out
}

// measureInRotation measures each alternative once, in the order rotation
// gives for run rep: alternative i's result is added to runs[i], or its
// error kept in failed[i]. tag(i) names the measurement, after the
// scenario's id, in the progress line, the checker and the error.
func measureInRotation[T any](b *Run, id string, rep int, runs [][]T, failed []string, tag func(i int) string, measure func(i int, chk *check.Checker) (T, error)) {
	for _, i := range rotation(len(runs), rep) {
		where := id + " " + tag(i)
		b.step(where)
		r, err := measure(i, b.checker(where))
		if err != nil {
			b.fail("%s: %v", where, err)
			failed[i] = err.Error()
			continue
		}
		runs[i] = append(runs[i], r)
	}
}

// goSessionsResult is one S6 run: S3's figures plus the setup's.
type goSessionsResult struct {
	sessionsResult
	setupCPU    time.Duration  // server CPU from the first dial to the last first answer
	setupGenCPU time.Duration  // harness CPU over the same time
	setupHist   hist.Histogram // per session: dial (and handshake) to the first answer
	setupOther  string         // a warning about foreign load during the setup, if any
}

// setupPerSession is the setup's wall time ÷ sessions, in µs.
func (r goSessionsResult) setupPerSession() float64 {
	return float64(r.setup.Microseconds()) / float64(r.sessions)
}

// setupCPUPerSession is the server CPU of the setup ÷ sessions, in µs.
func (r goSessionsResult) setupCPUPerSession() float64 {
	return float64(r.setupCPU.Nanoseconds()) / 1e3 / float64(r.sessions)
}

func (r goSessionsResult) rss() float64     { return r.rssPerSession() }
func (r goSessionsResult) fds() float64     { return r.fdsPerSession() }
func (r goSessionsResult) cpuPerM() float64 { return r.cpuPerMillion() }

// measureGoSessions runs S6's load against srv: it samples the idle server,
// sets every session up (measuring the setup), lets them heartbeat for warm,
// then measures CPU and heartbeats over win and samples RSS at its end.
func measureGoSessions(clk clock.Clock, srv *proc.Process, cfg *tls.Config, sessions int, lease, warm, win time.Duration, chk *check.Checker) (goSessionsResult, error) {
	res := goSessionsResult{sessionsResult: sessionsResult{sessions: sessions}}
	if err := sampleIdleServer(srv, &res.sessionsResult); err != nil {
		return res, err
	}
	g := newGoSessions(clk, srv.Addr, cfg, sessions, lease, chk)
	su := procstat.StartUsage(srv.Pid(), os.Getpid())
	t0 := time.Now()
	if err := g.Open(t0.Add(60*time.Second + time.Duration(sessions)*time.Millisecond)); err != nil {
		_ = g.Stop()
		return res, fmt.Errorf("setup: %w", err)
	}
	res.setup = time.Since(t0)
	setupUse, ok := su.Stop()
	if !ok || len(setupUse.CPU) != 2 {
		_ = g.Stop()
		return res, errors.New("could not sample the CPU")
	}
	res.setupCPU, res.setupGenCPU = setupUse.CPU[0], setupUse.CPU[1]
	time.Sleep(warm)
	if err := measureHeartbeatWindow(clk, srv, &g.heartbeatTally, g.Stop, win, &res.sessionsResult); err != nil {
		return res, err
	}
	res.setupOther = setupUse.OtherNote()
	res.setupHist = g.setup
	return res, nil
}

// joinNotes joins the non-empty notes with " · ".
func joinNotes(notes ...string) string {
	var out []string
	for _, n := range notes {
		if n != "" {
			out = append(out, n)
		}
	}
	return strings.Join(out, " · ")
}

// s6: what a TLS session costs compared with a plain one. The same
// goroutine-per-session client drives a plain server, a TLS one and a
// mutual-TLS one, alternating s6Runs times; medians shown.
func (b *Run) s6() *report.Scenario {
	sz := b.sz
	n := sz.s6Sessions
	at := " @" + report.GroupThousands(int64(n))
	sc := &report.Scenario{ID: "S6", Name: "tls", Desc: fmt.Sprintf(
		"S=%s sessions, half holders and half waiters, heartbeating every %v (lease %v), against monolock plain, with TLS and with mutual TLS; a goroutine per session in the client (crypto/tls or plain net.Conn); %v measured after %v",
		report.GroupThousands(int64(n)), sz.s6Lease/4, sz.s6Lease, sz.s6Window, sz.s6Warm)}
	dir := filepath.Join(b.tmp, "pki")
	pki, err := func() (*certstest.PKI, error) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		return certstest.Generate(dir)
	}()
	if err != nil {
		b.failRow(sc, report.SysMonolock, "all", "S6: certificates", err)
		return sc
	}
	runs := make([][]goSessionsResult, len(tlsModes))
	failed := make([]string, len(tlsModes))
	for rep := range sz.s6Runs {
		measureInRotation(b, "S6", rep, runs, failed,
			func(i int) string {
				tag := fmt.Sprintf("%s %s sessions", tlsModes[i].system(), report.GroupThousands(int64(n)))
				if sz.s6Runs > 1 {
					tag += fmt.Sprintf(" (run %d)", rep+1)
				}
				return tag
			},
			func(i int, chk *check.Checker) (goSessionsResult, error) {
				return b.runGoSessions(tlsModes[i], pki, n, chk)
			})
	}
	cost := &report.TLSCost{Sessions: n}
	for i, m := range tlsModes {
		rs := runs[i]
		if len(rs) == 0 {
			sc.Add(&report.Row{System: m.system(), Figure: "sessions" + at, Status: "error", Note: failed[i]})
			continue
		}
		rtt := b.addGoSessionRows(sc, m.system(), rs, at)
		cost.Modes = append(cost.Modes, report.TLSModeFigures{
			Mode:                   m.tag(),
			RSSPerSessionBytes:     medianOf(rs, goSessionsResult.rss),
			FDsPerSession:          medianOf(rs, goSessionsResult.fds),
			CPUPerMHb:              medianOf(rs, goSessionsResult.cpuPerM),
			RTTP50NS:               float64(rtt.P50),
			RTTP99NS:               float64(rtt.P99),
			SetupPerSessionUS:      medianOf(rs, goSessionsResult.setupPerSession),
			SetupCPUPerSessionUS:   medianOf(rs, goSessionsResult.setupCPUPerSession),
			HeartbeatsPerSecond:    medianOf(rs, func(r goSessionsResult) float64 { return r.heartbeatRate }),
			LateHeartbeats:         sumOf(rs, func(r goSessionsResult) uint64 { return r.late }),
			PromotedWaitersDropped: sumOf(rs, func(r goSessionsResult) uint64 { return r.promoted }),
		})
	}
	if len(cost.Modes) > 0 {
		b.report.TLS = cost
	}
	sc.Note("×monolock: this row ÷ the plain server's row (monolock) — the cost of TLS and of mutual TLS")
	sc.Note("RSS and CPU per heartbeat as in S3; setup = from the first dial to the last session's first answer (ACQUIRED or WAITING), %d sessions set up at once, holders first; per session = that time ÷ S (latency columns: one session's dial, handshake, ACQUIRE and answer); server CPU per setup = the server's CPU over the setup ÷ S", maxInflightGoDials)
	sc.Note("TLS: crypto/tls 1.3, ECDSA P-256 certificates from a throwaway CA (certstest.Generate), no session resumption; mTLS: the server also verifies a client certificate (-tls-client-ca)")
	if sz.s6Runs > 1 {
		sc.Note("%d alternating runs of each server (the order rotates), medians shown (every run listed in the note)", sz.s6Runs)
	} else {
		sc.Note("one short run of each server with few sessions: fixed costs weigh on the per-session figures; quote the full run's medians")
	}
	return sc
}

// runGoSessions starts monolock in mode m and measures one S6 run.
func (b *Run) runGoSessions(m tlsMode, pki *certstest.PKI, n int, chk *check.Checker) (goSessionsResult, error) {
	srv, err := b.srv.monolockWith("s6-"+m.tag(), tlsServerArgs(m, pki)...)
	if err != nil {
		return goSessionsResult{}, err
	}
	defer srv.Stop()
	sz := b.sz
	return measureGoSessions(b.clock, srv, tlsClientConfig(m, pki), n, sz.s6Lease, sz.s6Warm, sz.s6Window, chk)
}

// addGoSessionRows adds S6's rows of one server from its runs and returns
// the heartbeat RTT of all of them.
func (b *Run) addGoSessionRows(sc *report.Scenario, sys string, runs []goSessionsResult, at string) *hist.Summary {
	list := func(f func(goSessionsResult) float64, format string) string { return runsList(runs, f, format) }
	heartbeatRuns := make([]sessionsResult, len(runs))
	for i, r := range runs {
		heartbeatRuns[i] = r.sessionsResult
	}
	addRSSAndCPURows(sc, sys, heartbeatRuns, at, "B/session", "")
	sc.Add(&report.Row{System: sys, Figure: "descriptors per session" + at, Value: medianOf(runs, goSessionsResult.fds), Unit: "fd/session",
		Key: "fds", Lower: true, Note: list(goSessionsResult.fds, "%.2f")})
	mid := runs[len(runs)/2]
	var rtt, setup hist.Histogram
	var late, promoted uint64
	for _, r := range runs {
		rtt.Merge(&r.rtt)
		setup.Merge(&r.setupHist)
		late += r.late
		promoted += r.promoted
	}
	note := ""
	if len(runs) >= 2 {
		var parts []string
		for _, r := range runs {
			parts = append(parts, report.FormatDuration(r.rtt.Percentile(99)))
		}
		note = "p99 of the runs " + strings.Join(parts, ", ")
	}
	if late > 0 {
		note = joinNotes(note, fmt.Sprintf("%d heartbeats late (previous reply later than the interval)", late))
	}
	if promoted > 0 {
		note = joinNotes(note, fmt.Sprintf("%d waiters promoted (holders dropped)", promoted))
	}
	rttSum := summaryOf(&rtt)
	sc.Add(&report.Row{System: sys, Figure: "heartbeat RTT" + at, Value: medianOf(runs, func(r goSessionsResult) float64 { return r.heartbeatRate }),
		Unit: "hb/s", Lat: rttSum, Key: "rtt", Note: note})
	sc.Add(&report.Row{System: sys, Figure: "setup per session" + at, Value: medianOf(runs, goSessionsResult.setupPerSession), Unit: "µs",
		Lat: summaryOf(&setup), Key: "setup", Lower: true,
		Note: list(goSessionsResult.setupPerSession, "%.0f") + fmt.Sprintf("setup %v", mid.setup.Round(time.Millisecond))})
	setupOther := otherLoadWarnings(runs, func(r goSessionsResult) string { return r.setupOther })
	sc.Add(&report.Row{System: sys, Figure: "server CPU per session setup" + at, Value: medianOf(runs, goSessionsResult.setupCPUPerSession), Unit: "µs",
		Key: "setupcpu", Lower: true,
		Note: list(goSessionsResult.setupCPUPerSession, "%.0f") + joinNotes(fmt.Sprintf("srv %.0f%% · gen %.0f%% cpu during the setup",
			100*mid.setupCPU.Seconds()/mid.setup.Seconds(), 100*mid.setupGenCPU.Seconds()/mid.setup.Seconds()), setupOther)})
	return rttSum
}

// sumOf is the sum of f over runs.
func sumOf[T any](runs []T, f func(T) uint64) uint64 {
	var n uint64
	for _, r := range runs {
		n += f(r)
	}
	return n
}
