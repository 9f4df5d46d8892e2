package report

import (
	"fmt"
	"strings"
	"time"
)

// Render is the whole report as bench prints it on stdout: the machine,
// the versions, one table per scenario and the summary lines.
func Render(rep *Report) string {
	var s strings.Builder
	m := rep.Machine
	fmt.Fprintf(&s, "monolock bench — %s, %d CPUs (%s), kernel %s, %s; RLIMIT_NOFILE %d/%d → up to %s sessions\n",
		rep.Started.UTC().Format(time.RFC3339), m.NProc, m.CPUModel, m.Kernel, m.GoVersion,
		rep.Limits.NoFileSoft, rep.Limits.NoFileHard, GroupThousands(int64(rep.Limits.MaxSessions)))
	fmt.Fprintf(&s, "load average at start %s, at end %s", m.LoadAvgStart, m.LoadAvgEnd)
	if m.Background != "" {
		fmt.Fprintf(&s, "; %s", m.Background)
	}
	s.WriteString(" (rows marked ⚠ ran while other processes used the CPU)\n")
	if rep.Monolock != "" {
		fmt.Fprintf(&s, "monolock %s\n", rep.Monolock)
	}
	for _, p := range rep.Peers {
		if p.Status == "ok" {
			fmt.Fprintf(&s, "peer %s %s\n", p.Name, p.Version)
		} else {
			fmt.Fprintf(&s, "peer %s skipped: %s\n", p.Name, p.Reason)
		}
	}
	s.WriteString("ratios: ×monolock = this row ÷ monolock's row; ×floor = this row ÷ its floor row (S0, or bare gnet in S3 and S5)\n\n")
	for _, sc := range rep.Scenarios {
		s.WriteString(RenderScenario(sc))
		s.WriteByte('\n')
	}
	c := rep.Core
	if c.Sessions > 0 {
		fmt.Fprintf(&s, "core server @%s sessions: RSS per session %.0f B (target ≤ 1024: %s); CPU per 1M heartbeats monolock %.3f s, bare gnet %.3f s, ratio %.2f× (target ≤ 1.2×: %s)\n",
			GroupThousands(int64(c.Sessions)), c.RSSPerSessionBytes, Verdict(c.RSSPerSessionBytes <= 1024),
			c.CPUPerMHbMonolock, c.CPUPerMHbFloor, c.CPUPerHeartbeatRatio, Verdict(c.CPUPerHeartbeatRatio <= 1.2))
		if rep.Quick {
			s.WriteString("  (the targets are set for 10,000 sessions, as in the full run; at a quick run's size the fixed overhead dominates RSS per session)\n")
		}
	}
	s.WriteString(renderCycleCPU(rep.Scenarios))
	s.WriteString(RenderTLSCost(rep.TLS))
	s.WriteString(RenderBookkeeping(rep.Bookkeep))
	if len(rep.Violations) > 0 {
		s.WriteString("\nVIOLATIONS:\n")
		for _, v := range rep.Violations {
			fmt.Fprintf(&s, "  %s\n", v)
		}
	} else {
		s.WriteString("correctness: no two holders of one lock and no token going backwards were seen\n")
	}
	if len(rep.Errors) > 0 {
		s.WriteString("\nERRORS:\n")
		for _, e := range rep.Errors {
			fmt.Fprintf(&s, "  %s\n", e)
		}
	}
	fmt.Fprintf(&s, "took %s\n", rep.Finished.Sub(rep.Started).Round(time.Second))
	return s.String()
}

// renderCycleCPU is the summary line of S1's server CPU per cycle.
func renderCycleCPU(scs []*Scenario) string {
	vals := map[string]float64{}
	for _, sc := range scs {
		for _, r := range sc.Rows {
			if r.Status == "" && strings.HasPrefix(r.Key, KeyCPUCycle) {
				vals[r.Key] = r.Value
			}
		}
	}
	m, safe, gn := vals[KeyCPUCycle], vals[KeyCPUCycleSafe], vals[KeyCPUCycleGnet]
	if m == 0 || safe == 0 || gn == 0 {
		return ""
	}
	return fmt.Sprintf("server CPU per lock cycle: monolock %.1f µs; EMFILE-safe floor (Go accept) %.1f µs, ratio %.2f× (target ≤ 1.1×); gnet's acceptor %.1f µs, ratio %.2f× (stretch ≤ 1.5×)\n",
		m, safe, m/safe, gn, m/gn)
}
