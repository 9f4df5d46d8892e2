// Package machine is what bench reads of and does to the machine it runs
// on: the description in the report, the load average, waiting for other
// load to drop, the local port range and the descriptor limit.
package machine

import (
	"fmt"
	"github.com/monolock/monolock/bench/procstat"
	"github.com/monolock/monolock/bench/report"
	"github.com/monolock/monolock/internal/testsupport/fdbudget"
	"os"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// Info describes this machine for the report.
func Info() report.Machine {
	m := report.Machine{NProc: runtime.NumCPU(), GoVersion: runtime.Version(), LoadAvgStart: LoadAvg()}
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

// LoadAvg is the first three fields of /proc/loadavg.
func LoadAvg() string {
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

// WaitQuiet waits, up to limit, until other processes use less than
// procstat.BusyThreshold of a core for three seconds in a row, and says what it found.
func WaitQuiet(limit time.Duration) string {
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

// EphemeralPorts is the size of the local port range (0 when unknown).
func EphemeralPorts() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	var lo, hi int
	if _, err := fmt.Sscan(string(b), &lo, &hi); err != nil || hi < lo {
		return 0
	}
	return hi - lo + 1
}

// descriptor headroom kept free in both processes beyond the sessions.
const fdHeadroom = 500

// RaiseNoFile raises the soft descriptor limit to the hard one (children
// inherit it) and returns both, and the largest session count that leaves
// headroom in the harness and in a server with the same limit. Loopback
// ephemeral ports bound it as well.
func RaiseNoFile(ports int) (soft, hard uint64, maxSessions int, err error) {
	if soft, hard, err = fdbudget.RaiseSoft(); err != nil {
		return 0, 0, 0, err
	}
	limit := min(int64(soft), 1<<20) - fdHeadroom
	if ports > 0 {
		limit = min(limit, int64(ports)-2*fdHeadroom)
	}
	limit = limit / 500 * 500
	return soft, hard, max(int(limit), 0), nil
}
