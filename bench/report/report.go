// Package report is what one harness run measured: the tables, their
// ratios and how they are printed, and the JSON written with -json.
package report

import (
	"encoding/json"
	"fmt"
	"github.com/monolock/monolock/bench/hist"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Report is everything one run measured; it is what -json writes.
type Report struct {
	Started    time.Time    `json:"started"`
	Finished   time.Time    `json:"finished"`
	Command    string       `json:"command"`
	Quick      bool         `json:"quick"`
	Monolock   string       `json:"monolock_version"`
	Machine    Machine      `json:"machine"`
	Limits     Limits       `json:"limits"`
	Peers      []PeerStatus `json:"peers"`
	Scenarios  []*Scenario  `json:"scenarios"`
	Core       CoreFigures  `json:"core_server"`
	TLS        *TLSCost     `json:"tls_cost,omitempty"`
	Bookkeep   *Bookkeeping `json:"bookkeeping_cost,omitempty"`
	Violations []string     `json:"violations"`
	Errors     []string     `json:"errors"`
}

// Machine describes where the run happened.
type Machine struct {
	NProc     int    `json:"nproc"`
	CPUModel  string `json:"cpu_model"`
	Kernel    string `json:"kernel"`
	GoVersion string `json:"go_version"`
	MemTotal  string `json:"mem_total"`

	LoadAvgStart string `json:"loadavg_start"`
	LoadAvgEnd   string `json:"loadavg_end"`
	Background   string `json:"background,omitempty"` // what -wait-quiet found
}

// Limits are the descriptor limits found and the session counts derived.
type Limits struct {
	NoFileSoft  uint64 `json:"nofile_soft"`
	NoFileHard  uint64 `json:"nofile_hard"`
	MaxSessions int    `json:"max_sessions"`
}

// PeerStatus says whether a peer took part, and why not.
type PeerStatus struct {
	Name    string `json:"name"`
	Status  string `json:"status"` // "ok" or "skipped"
	Reason  string `json:"reason,omitempty"`
	Version string `json:"version,omitempty"`
}

// CoreFigures are the two figures the core-server issue asks for.
type CoreFigures struct {
	Sessions             int     `json:"sessions"`
	RSSPerSessionBytes   float64 `json:"rss_per_session_bytes"`
	CPUPerMHbMonolock    float64 `json:"cpu_s_per_million_heartbeats_monolock"`
	CPUPerMHbFloor       float64 `json:"cpu_s_per_million_heartbeats_bare_gnet"`
	CPUPerHeartbeatRatio float64 `json:"cpu_per_heartbeat_ratio"`
}

// TLSCost is S6's summary: what a session costs plain, with TLS and with
// mutual TLS (medians of the runs).
type TLSCost struct {
	Sessions int              `json:"sessions"`
	Modes    []TLSModeFigures `json:"modes"` // plain first
}

// TLSModeFigures are one server configuration's S6 figures.
type TLSModeFigures struct {
	Mode                   string  `json:"mode"` // plain, tls, mtls
	RSSPerSessionBytes     float64 `json:"rss_per_session_bytes"`
	FDsPerSession          float64 `json:"descriptors_per_session"`
	CPUPerMHb              float64 `json:"cpu_s_per_million_heartbeats"`
	RTTP50NS               float64 `json:"heartbeat_rtt_p50_ns"` // of every run's heartbeats together
	RTTP99NS               float64 `json:"heartbeat_rtt_p99_ns"`
	SetupPerSessionUS      float64 `json:"setup_us_per_session"`
	SetupCPUPerSessionUS   float64 `json:"server_cpu_us_per_session_setup"`
	HeartbeatsPerSecond    float64 `json:"heartbeats_per_second"`
	LateHeartbeats         uint64  `json:"late_heartbeats"`
	PromotedWaitersDropped uint64  `json:"waiters_promoted"`
}

// Bookkeeping is S7's summary: the server's CPU per grant and per heartbeat
// with metrics and the audit log off and on (medians of the runs).
type Bookkeeping struct {
	Sessions int                  `json:"heartbeat_sessions"`
	Target   float64              `json:"target_ratio"`
	Configs  []BookkeepingFigures `json:"configs"` // bare first
}

// BookkeepingFigures are one server configuration's S7 figures.
type BookkeepingFigures struct {
	Config       string  `json:"config"` // bare, ops, ops+audit
	CPUPerGrant  float64 `json:"cpu_us_per_grant"`
	CPUPerMHb    float64 `json:"cpu_s_per_million_heartbeats"`
	GrantRatio   float64 `json:"grant_ratio_to_bare,omitempty"`
	HbRatio      float64 `json:"heartbeat_ratio_to_bare,omitempty"`
	CyclesPerSec float64 `json:"cycles_per_second"`
}

// System names in the tables.
const (
	SysFloor    = "floor"     // S0: the bare gnet server
	SysBareGnet = "bare gnet" // S3: the same server under the heartbeat load
	// SysFloorSafe is the bare gnet server fed by a Go listener and
	// EnrollContext: the least an EMFILE-safe accept path costs (S1).
	SysFloorSafe = "bare gnet, Go accept"
)

// Row keys that tie figures across scenarios.
const (
	KeyEcho1   = "echo1"
	KeyEchoC   = "echoC"
	KeyCycleC  = "cycleC"
	KeyConnC   = "connectC"
	KeyCycle   = "cycle"
	KeyHandovr = "handover"
)

// Keys of S1's server-CPU-per-cycle rows.
const (
	KeyCPUCycle     = "cpuCycle"     // monolock: dial, ACQUIRE, ACQUIRED, close
	KeyCPUCycleGnet = "cpuCycleGnet" // bare gnet, its own acceptor: dial, 1 byte, 9 bytes, close
	KeyCPUCycleSafe = "cpuCycleSafe" // bare gnet, Go listener and EnrollContext: the same
)

// Scenario is one table.
type Scenario struct {
	ID    string   `json:"id"`
	Name  string   `json:"name"`
	Desc  string   `json:"description"`
	Rows  []*Row   `json:"rows"`
	Notes []string `json:"notes,omitempty"`
}

// Row is one measured figure of one system.
type Row struct {
	System string        `json:"system"`
	Figure string        `json:"figure"`
	Value  float64       `json:"value"`
	Unit   string        `json:"unit"`
	Lat    *hist.Summary `json:"latency,omitempty"` // nanoseconds
	// VsMonolock is Value ÷ the monolock row's Value for the same figure.
	VsMonolock *float64 `json:"vs_monolock,omitempty"`
	// VsFloor is Value ÷ the floor row's Value that Floor names.
	VsFloor *float64 `json:"vs_floor,omitempty"`
	Status  string   `json:"status,omitempty"` // "", "skipped", "n/a", "error"
	Note    string   `json:"note,omitempty"`

	// Key matches rows of one figure across systems; Floor names the S0/floor
	// row's key this row is compared with; Lower says smaller is better.
	Key   string `json:"key,omitempty"`
	Floor string `json:"floor_key,omitempty"`
	Lower bool   `json:"lower_is_better,omitempty"`
}

const SysMonolock = "monolock"

// Add appends a row.
func (s *Scenario) Add(r *Row) *Row {
	s.Rows = append(s.Rows, r)
	return r
}

// Note appends a note printed under the table.
func (s *Scenario) Note(format string, args ...any) {
	s.Notes = append(s.Notes, fmt.Sprintf(format, args...))
}

// ComputeRatios fills VsMonolock and VsFloor. floors maps a key to the value
// of the floor row with that key.
func ComputeRatios(scs []*Scenario) {
	floors := map[string]float64{}
	for _, sc := range scs {
		for _, r := range sc.Rows {
			if r.Status == "" && r.Key != "" && isFloorSystem(r.System) {
				floors[r.Key] = r.Value
			}
		}
	}
	for _, sc := range scs {
		mono := map[string]float64{}
		for _, r := range sc.Rows {
			if r.Status == "" && r.System == SysMonolock && r.Key != "" {
				mono[r.Key] = r.Value
			}
		}
		for _, r := range sc.Rows {
			if r.Status != "" {
				continue
			}
			if m, ok := mono[r.Key]; ok && r.Key != "" && m != 0 {
				v := r.Value / m
				r.VsMonolock = &v
			}
			if f, ok := floors[r.Floor]; ok && r.Floor != "" && f != 0 {
				v := r.Value / f
				r.VsFloor = &v
			}
		}
	}
}

func isFloorSystem(s string) bool { return s == SysFloor || s == SysBareGnet || s == SysFloorSafe }

// Failed reports whether the run must exit non-zero.
func (r *Report) Failed() bool { return len(r.Violations) > 0 || len(r.Errors) > 0 }

// WriteJSON writes the report to path.
func (r *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// RenderTLSCost is S6's summary under the tables ("" without S6).
func RenderTLSCost(c *TLSCost) string {
	if c == nil || len(c.Modes) == 0 {
		return ""
	}
	var s strings.Builder
	fmt.Fprintf(&s, "TLS cost @%s sessions (medians; ratio to plain):\n", GroupThousands(int64(c.Sessions)))
	var plain *TLSModeFigures
	if c.Modes[0].Mode == "plain" {
		plain = &c.Modes[0]
	}
	line := func(label string, f func(TLSModeFigures) float64, render func(float64) string) {
		parts := make([]string, 0, len(c.Modes))
		for _, m := range c.Modes {
			p := m.Mode + " " + render(f(m))
			if plain != nil && m.Mode != plain.Mode && f(*plain) > 0 {
				p += " (" + FormatRatio(f(m)/f(*plain)) + ")"
			}
			parts = append(parts, p)
		}
		fmt.Fprintf(&s, "  %-36s %s\n", label, strings.Join(parts, " · "))
	}
	unit := func(u string) func(float64) string { return func(v float64) string { return FormatValue(v, u) } }
	line("RSS per session", func(m TLSModeFigures) float64 { return m.RSSPerSessionBytes }, unit("B"))
	line("descriptors per session", func(m TLSModeFigures) float64 { return m.FDsPerSession }, func(v float64) string { return fmt.Sprintf("%.2f", v) })
	line("server CPU per 1M heartbeats", func(m TLSModeFigures) float64 { return m.CPUPerMHb }, unit("s"))
	line("heartbeat RTT p50", func(m TLSModeFigures) float64 { return m.RTTP50NS }, func(v float64) string { return FormatDuration(int64(v)) })
	line("heartbeat RTT p99", func(m TLSModeFigures) float64 { return m.RTTP99NS }, func(v float64) string { return FormatDuration(int64(v)) })
	line("setup per session", func(m TLSModeFigures) float64 { return m.SetupPerSessionUS }, unit("µs"))
	line("server CPU per session setup", func(m TLSModeFigures) float64 { return m.SetupCPUPerSessionUS }, unit("µs"))
	return s.String()
}

// Verdict says whether a figure met its target, next to the target.
func Verdict(met bool) string {
	if met {
		return "met"
	}
	return "not met"
}

// RenderBookkeeping is S7's summary under the tables ("" without S7).
func RenderBookkeeping(b *Bookkeeping) string {
	if b == nil || len(b.Configs) == 0 {
		return ""
	}
	var s strings.Builder
	fmt.Fprintf(&s, "metrics + audit cost (medians; ratio to bare, target under %.2f×):\n", b.Target)
	line := func(label string, f func(BookkeepingFigures) (float64, float64), u string) {
		parts := make([]string, 0, len(b.Configs))
		for _, c := range b.Configs {
			v, ratio := f(c)
			if v == 0 {
				parts = append(parts, c.Config+" –")
				continue
			}
			p := c.Config + " " + FormatValue(v, u)
			if ratio > 0 {
				p += " (" + FormatRatio(ratio)
				if c.Config != "bare" {
					p += ": " + Verdict(ratio < b.Target)
				}
				p += ")"
			}
			parts = append(parts, p)
		}
		fmt.Fprintf(&s, "  %-36s %s\n", label, strings.Join(parts, " · "))
	}
	line("server CPU per grant", func(c BookkeepingFigures) (float64, float64) { return c.CPUPerGrant, c.GrantRatio }, "µs")
	line(fmt.Sprintf("server CPU per 1M heartbeats @%s", GroupThousands(int64(b.Sessions))),
		func(c BookkeepingFigures) (float64, float64) { return c.CPUPerMHb, c.HbRatio }, "s")
	return s.String()
}
