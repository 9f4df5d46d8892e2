package scenario

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/monolock/monolock/bench/netns"
	"github.com/monolock/monolock/bench/releaseloop"
	"github.com/monolock/monolock/bench/report"
	"github.com/monolock/monolock/internal/testsupport/proc"
)

// S9 measures what a release leaves on the client host. One connection per
// lock, and whichever side closes first keeps the connection's TIME_WAIT
// entry for 60 s: a client that closes first leaves one per release, each an
// ephemeral port towards the server's address, and at Linux's defaults
// (28,232 ports, tcp_tw_reuse=2, which reuses them only on loopback) one
// client host runs out after about 12 s at 12k cycles/s. With RELEASE the
// server closes first.
//
// The Go client's lock-cycle loop (release-loop, bench/releaseloop) runs in a
// client network namespace joined to the server's by a veth pair
// (bench/netns), for s9Dur: with RELEASE, and with the client's FIN first (a
// client from before RELEASE); then the same loop with RELEASE over
// loopback, side by side. Each row gives cycles per second over the whole
// run, connect failures (EADDRNOTAVAIL among them) and the TIME_WAIT
// entries left towards the server at the end. The loss case drops every FIN
// and RST the client namespace sends (iptables) and measures how long the
// server keeps a lock after the holder's release has returned: with
// RELEASE, with a FIN and with an RST.
//
// It needs root (network namespaces, iptables) and the ip and iptables
// commands (make bench-netns-deps); without them the rows say skipped.

// s9Loop is one loop of S9: where it runs and how the client releases.
type s9Loop struct {
	figure string
	netns  bool   // in the client namespace; else over loopback
	close  string // release-loop -close
}

var s9Loops = []s9Loop{
	{"cycles/s, RELEASE, client netns → server netns", true, "release"},
	{"cycles/s, RELEASE, loopback", false, "release"},
	{"cycles/s, FIN first (no RELEASE), client netns → server netns", true, "fin"},
}

// s9LossCloses are the ways of closing the loss case measures.
var s9LossCloses = []string{"release", "fin", "rst"}

// s9Target is the rate the RELEASE loop across the link must sustain.
const s9Target = 10_000

const sysMonolockGo = "monolock, Go client"

func (b *Run) s9() *report.Scenario {
	sz := b.sz
	sc := &report.Scenario{ID: "S9", Name: "release ports", Desc: fmt.Sprintf(
		"Go client lock cycles (Acquire, Close) from %d goroutines for %v each; client and server in two network namespaces joined by a veth pair (default sysctls), or over loopback", sz.s9Workers, sz.s9Dur)}
	if why := s9Missing(); why != "" {
		for _, l := range s9Loops {
			sc.Add(&report.Row{System: sysMonolockGo, Figure: l.figure, Status: "skipped", Note: why})
		}
		return sc
	}
	for _, l := range s9Loops {
		b.step("S9 " + l.figure)
		res, err := b.s9Run(l.netns, "-mode", "loop", "-close", l.close, "-dur", sz.s9Dur.String(), "-workers", fmt.Sprint(sz.s9Workers))
		if err != nil {
			b.failRow(sc, sysMonolockGo, l.figure, "S9 "+l.figure, err)
			continue
		}
		rate := float64(res.Cycles) / res.Seconds
		note := fmt.Sprintf("%d connect failures (%d EADDRNOTAVAIL), %d other; %d TIME_WAIT left; slowest second %d, fastest %d",
			res.ConnectFailures, res.AddrNotAvail, res.OtherFailures, res.TimeWait, slices.Min(res.PerSecond), slices.Max(res.PerSecond))
		if stall := stalledSeconds(res.PerSecond); stall > 0 {
			note += fmt.Sprintf("; %d seconds under a tenth of the fastest", stall)
		}
		sc.Add(&report.Row{System: sysMonolockGo, Figure: l.figure, Value: rate, Unit: "/s", Note: note})
		if l.close == "release" && (res.ConnectFailures > 0 || res.TimeWait > 0) {
			b.fail("S9 %s: %d connect failures and %d TIME_WAIT entries left on the client: want none with RELEASE", l.figure, res.ConnectFailures, res.TimeWait)
		}
		if l.close == "release" && l.netns && !b.opt.Quick && rate < s9Target {
			b.fail("S9 %s: %.0f cycles/s, want at least %d", l.figure, rate, s9Target)
		}
	}
	b.step("S9 the loss case")
	for _, how := range s9LossCloses {
		figure := "lock kept after the release returned, client FINs and RSTs dropped, " + how
		res, err := b.s9Run(true, "-mode", "loss", "-close", how, "-trials", fmt.Sprint(sz.s9Trials), "-lease", "2s")
		if err != nil {
			b.failRow(sc, sysMonolockGo, figure, "S9 loss "+how, err)
			continue
		}
		med := res.HoldAfterMS[len(res.HoldAfterMS)/2]
		sc.Add(&report.Row{System: sysMonolockGo, Figure: figure, Value: med, Unit: "ms", Lower: true,
			Note: fmt.Sprintf("median of %d; all %v ms; lease 2 s", len(res.HoldAfterMS), res.HoldAfterMS)})
	}
	sc.Note("RELEASE: the server frees the lock when it reads the byte and closes first; FIN first: a client from before RELEASE (its Go client's RELEASE turned into its own close); rst: the release's fallback")
	return sc
}

// s9Missing says why S9 cannot run here, or "".
func s9Missing() string {
	if os.Geteuid() != 0 {
		return "needs root (network namespaces, iptables)"
	}
	for _, tool := range []string{"ip", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			return tool + " is not installed: make bench-netns-deps"
		}
	}
	return ""
}

// s9Run starts a server and runs release-loop with args against it: in a
// fresh pair of namespaces (the loss case with the client's FINs and RSTs
// dropped), or over loopback. The namespaces are removed whatever happens.
func (b *Run) s9Run(inNetns bool, args ...string) (res releaseloop.Result, err error) {
	var srv *proc.Process
	clientNS, addr := "", ""
	if inNetns {
		b.nsPairs++
		pair, err := netns.New(b.nsPairs)
		if err != nil {
			return res, err
		}
		defer func() {
			if rerr := pair.Remove(); rerr != nil && err == nil {
				err = rerr
			}
		}()
		if slices.Contains(args, "loss") {
			if err := pair.DropClientCloses(); err != nil {
				return res, err
			}
		}
		addr = netns.ServerAddr + ":" + netns.Port
		o := b.srv.options("monolock", b.srv.logPath("monolock-s9-netns"), []string{"-log-level", "info", "-listen", addr})
		o.Netns = pair.Server
		if srv, err = proc.Monolock(b.srv.monolockBin, o); err != nil {
			return res, err
		}
		clientNS = pair.Client
	} else {
		if srv, err = b.srv.monolock("s9-loopback"); err != nil {
			return res, err
		}
		addr = srv.Addr
	}
	defer func() { _ = srv.Stop() }()
	child, err := proc.StartChild(b.srv.selfBin, proc.ChildOptions{
		Name: "release-loop", Netns: clientNS, NoInput: true,
		Args: append([]string{"release-loop", "-addr", addr}, args...),
	})
	if err != nil {
		return res, err
	}
	line, err := child.Next(b.sz.s9Dur + 2*time.Minute)
	if err != nil {
		child.Kill()
		return res, fmt.Errorf("release-loop: %w: %s", err, strings.TrimSpace(child.Stderr()))
	}
	<-child.Done()
	if err := json.Unmarshal([]byte(line.Text), &res); err != nil {
		return res, fmt.Errorf("release-loop printed %q: %w", line.Text, err)
	}
	if !srv.Alive() {
		return res, errExited
	}
	return res, nil
}

// stalledSeconds counts the whole seconds (the last, partial one aside) in
// which fewer cycles completed than a tenth of the fastest second: the
// client host out of ports.
func stalledSeconds(perSecond []uint64) int {
	if len(perSecond) < 2 {
		return 0
	}
	full := perSecond[:len(perSecond)-1]
	fastest := slices.Max(full)
	n := 0
	for _, c := range full {
		if c*10 < fastest {
			n++
		}
	}
	return n
}
