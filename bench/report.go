package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
	System string   `json:"system"`
	Figure string   `json:"figure"`
	Value  float64  `json:"value"`
	Unit   string   `json:"unit"`
	Lat    *Summary `json:"latency,omitempty"` // nanoseconds
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

const sysMonolock = "monolock"

// Add appends a row.
func (s *Scenario) Add(r *Row) *Row {
	s.Rows = append(s.Rows, r)
	return r
}

// Note appends a note printed under the table.
func (s *Scenario) Note(format string, args ...any) {
	s.Notes = append(s.Notes, fmt.Sprintf(format, args...))
}

// computeRatios fills VsMonolock and VsFloor. floors maps a key to the value
// of the floor row with that key.
func computeRatios(scs []*Scenario) {
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
			if r.Status == "" && r.System == sysMonolock && r.Key != "" {
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

func isFloorSystem(s string) bool { return s == sysFloor || s == sysBareGnet }

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
