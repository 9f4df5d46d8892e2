package main

import (
	"fmt"
	"github.com/monolock/monolock/bench/procstat"
	"github.com/monolock/monolock/bench/report"
	"os"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// machineInfo describes this machine for the report.
func machineInfo() report.Machine {
	m := report.Machine{NProc: runtime.NumCPU(), GoVersion: runtime.Version(), LoadAvgStart: loadAvg()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	var u syscall.Utsname
	if syscall.Uname(&u) == nil {
		m.Kernel = utsString(u.Release[:])
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				m.MemTotal = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

func utsString(cs []int8) string {
	b := make([]byte, 0, len(cs))
	for _, c := range cs {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(b)
}

// loadAvg is the first three fields of /proc/loadavg.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// waitQuiet waits, up to limit, until other processes use less than
// procstat.BusyThreshold of a core for three seconds in a row, and says what it found.
func waitQuiet(limit time.Duration) string {
	deadline := time.Now().Add(limit)
	quiet := 0
	last := 0.0
	for time.Now().Before(deadline) {
		u := procstat.StartUsage(os.Getpid())
		time.Sleep(time.Second)
		r, ok := u.Stop()
		if !ok {
			return "could not sample the machine's CPU"
		}
		last = r.Other
		if r.Other < procstat.BusyThreshold {
			quiet++
			if quiet >= 3 {
				return fmt.Sprintf("quiet at start (other load %.0f%% of a core)", 100*r.Other)
			}
		} else {
			quiet = 0
		}
	}
	return fmt.Sprintf("still busy after waiting %v (other load %.0f%% of a core)", limit, 100*last)
}
