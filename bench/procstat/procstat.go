// Package procstat samples /proc: a process's CPU time and memory, a
// process with its children, the whole machine's CPU, and what else ran
// during a measurement.
package procstat

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTick is USER_HZ, the unit of utime and stime in /proc/<pid>/stat. It
// is 100 on every Linux architecture Go supports.
const clockTick = 100

// Sample is one reading of a process's CPU time and memory.
type Sample struct {
	At      time.Time
	UTime   uint64 // clock ticks, all threads
	STime   uint64 // clock ticks, all threads
	SchedNS uint64 // ns on CPU, summed over the live threads (/proc/<pid>/task/*/schedstat)
	RSS     int64  // bytes (VmRSS)
	RSSAnon int64  // bytes (RssAnon)
	Threads int
}

// CPU is utime+stime as a duration.
func (s Sample) CPU() time.Duration {
	return time.Duration(s.UTime+s.STime) * time.Second / clockTick
}

// CPUDelta is the CPU time between two samples: the nanosecond schedstat sum
// when both have it and it did not shrink (a thread exited), else utime+stime.
func CPUDelta(a, b Sample) time.Duration {
	if a.SchedNS > 0 && b.SchedNS >= a.SchedNS && b.Threads >= a.Threads {
		return time.Duration(b.SchedNS - a.SchedNS)
	}
	return b.CPU() - a.CPU()
}

// Read samples /proc/<pid>.
func Read(pid int) (Sample, error) {
	s := Sample{At: time.Now()}
	base := fmt.Sprintf("/proc/%d", pid)
	stat, err := os.ReadFile(base + "/stat")
	if err != nil {
		return s, err
	}
	if s.UTime, s.STime, err = parseStat(stat); err != nil {
		return s, err
	}
	status, err := os.ReadFile(base + "/status")
	if err != nil {
		return s, err
	}
	s.RSS, s.RSSAnon, s.Threads = parseStatus(status)
	tasks, _ := filepath.Glob(base + "/task/*/schedstat")
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		if ns, err := parseSchedstat(b); err == nil {
			s.SchedNS += ns
		}
	}
	if len(tasks) != s.Threads {
		s.Threads = len(tasks)
	}
	return s, nil
}

// parseStat extracts utime and stime (fields 14 and 15) from a stat line.
func parseStat(b []byte) (utime, stime uint64, err error) {
	return parseStatPair(b, 14, "utime", "stime")
}

// parseStatPair extracts the numeric fields field and field+1 (numbered
// from 1, as in proc(5)) of a stat line, named first and second in errors.
// The command name in parentheses may hold spaces, so fields count from the
// last ')'.
func parseStatPair(b []byte, field int, first, second string) (uint64, uint64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, errors.New("stat: no ')'")
	}
	f := strings.Fields(string(b[i+1:]))
	k := field - 3 // f[0] is field 3 (state)
	if len(f) < k+2 {
		return 0, 0, fmt.Errorf("stat: %d fields after the name", len(f))
	}
	x, err := strconv.ParseUint(f[k], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("stat %s: %w", first, err)
	}
	y, err := strconv.ParseUint(f[k+1], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("stat %s: %w", second, err)
	}
	return x, y, nil
}

// parseStatus extracts VmRSS and RssAnon (bytes) and Threads.
func parseStatus(b []byte) (rss, anon int64, threads int) {
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "VmRSS":
			rss = n * 1024
		case "RssAnon":
			anon = n * 1024
		case "Threads":
			threads = int(n)
		}
	}
	return rss, anon, threads
}

// parseSchedstat returns the first field of a schedstat line: ns on CPU.
func parseSchedstat(b []byte) (uint64, error) {
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, errors.New("schedstat: empty")
	}
	return strconv.ParseUint(f[0], 10, 64)
}

// MachineCPU is a reading of /proc/stat's first line, in clock ticks.
type MachineCPU struct {
	At    time.Time
	Busy  uint64 // user, nice, system (irq and softirq time is left out: on loopback most of it is the measured traffic's own)
	Steal uint64
	Total uint64 // every field
}

// ReadMachineCPU samples /proc/stat.
func ReadMachineCPU() (MachineCPU, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return MachineCPU{}, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return parseMachineCPU(line, time.Now())
}

// parseMachineCPU reads "cpu user nice system idle iowait irq softirq steal …".
func parseMachineCPU(line string, at time.Time) (MachineCPU, error) {
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return MachineCPU{}, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	m := MachineCPU{At: at}
	for i, s := range f[1:] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return MachineCPU{}, fmt.Errorf("/proc/stat: %w", err)
		}
		m.Total += v
		switch i {
		case 0, 1, 2: // user nice system
			m.Busy += v
		case 7:
			m.Steal = v
		}
	}
	return m, nil
}

// cpuShare is CPU time over wall time as a fraction of one core.
func cpuShare(cpu time.Duration, wall time.Duration) float64 {
	if wall <= 0 {
		return 0
	}
	return cpu.Seconds() / wall.Seconds()
}

// usage tracks the CPU of the measured processes and of the whole machine
// over one measurement, to report what else was running.
type Usage struct {
	pids  []int
	procs []Sample
	mach  MachineCPU
	ok    bool
}

// StartUsage samples pids (0s are ignored; a negative one is a process with
// its children) and the machine.
func StartUsage(pids ...int) *Usage {
	u := &Usage{}
	for _, p := range pids {
		if p == 0 {
			continue
		}
		s, err := readAny(p)
		if err != nil {
			return u
		}
		u.pids = append(u.pids, p)
		u.procs = append(u.procs, s)
	}
	m, err := ReadMachineCPU()
	if err != nil {
		return u
	}
	u.mach, u.ok = m, true
	return u
}

// UsageResult is what ran during a measurement, in fractions of one core.
type UsageResult struct {
	Procs []float64 // per pid given to StartUsage, in order
	Other float64   // the rest of the machine's busy time
	Steal float64
	Wall  time.Duration
	CPU   []time.Duration
}

// stop samples again and returns the shares.
func (u *Usage) Stop() (UsageResult, bool) {
	var r UsageResult
	if !u.ok {
		return r, false
	}
	var mine time.Duration
	for i, p := range u.pids {
		s, err := readAny(p)
		if err != nil {
			return r, false
		}
		d := CPUDelta(u.procs[i], s)
		r.CPU = append(r.CPU, d)
		mine += d
		r.Wall = s.At.Sub(u.procs[i].At)
	}
	m, err := ReadMachineCPU()
	if err != nil {
		return r, false
	}
	wall := m.At.Sub(u.mach.At)
	if r.Wall == 0 {
		r.Wall = wall
	}
	for _, d := range r.CPU {
		r.Procs = append(r.Procs, cpuShare(d, r.Wall))
	}
	busy := time.Duration(m.Busy-u.mach.Busy) * time.Second / clockTick
	r.Other = max(cpuShare(busy-mine, wall), 0)
	r.Steal = cpuShare(time.Duration(m.Steal-u.mach.Steal)*time.Second/clockTick, wall)
	return r, true
}

// BusyThreshold: other work above this share of a core marks a measurement
// as taken on a busy machine.
const BusyThreshold = 0.15

// OtherNote describes foreign load, or nothing on a quiet machine.
func (r UsageResult) OtherNote() string {
	s := ""
	if r.Other >= BusyThreshold {
		s = fmt.Sprintf("other load %.0f%% cpu", 100*r.Other)
	}
	if r.Steal >= 0.05 {
		if s != "" {
			s += ", "
		}
		s += fmt.Sprintf("steal %.0f%%", 100*r.Steal)
	}
	if s != "" {
		s = "⚠ " + s
	}
	return s
}

// readAny reads a process (pid > 0) or a process with its children (pid < 0).
func readAny(pid int) (Sample, error) {
	if pid < 0 {
		return ReadFamily(-pid)
	}
	return Read(pid)
}

// ReadFamily sums utime and stime over a process and its live children,
// plus the children that already exited (PostgreSQL's postmaster and its
// backends, which each call setsid, so a process group would not hold them).
// Only CPU fields are set.
func ReadFamily(pid int) (Sample, error) {
	s := Sample{At: time.Now()}
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return s, err
	}
	found := false
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		self, parent, err := parsePids(b)
		if err != nil || (self != pid && parent != pid) {
			continue
		}
		u, st, err := parseStat(b)
		if err != nil {
			continue
		}
		s.UTime += u
		s.STime += st
		s.Threads++
		if self == pid {
			// Children that exited and were reaped keep counting, in the
			// parent's cutime and cstime.
			cu, cs, err := parseStatChildren(b)
			if err != nil {
				return s, err
			}
			s.UTime += cu
			s.STime += cs
			found = true
		}
	}
	if !found {
		return s, fmt.Errorf("no process %d", pid)
	}
	return s, nil
}

// parseStatChildren extracts cutime and cstime (fields 16 and 17): the CPU
// of the process's children that exited and were waited for.
func parseStatChildren(b []byte) (cutime, cstime uint64, err error) {
	return parseStatPair(b, 16, "cutime", "cstime")
}

// parsePids extracts the pid (field 1) and parent pid (field 4) of a stat line.
func parsePids(b []byte) (pid, ppid int, err error) {
	i := bytes.LastIndexByte(b, ')')
	j := bytes.IndexByte(b, ' ')
	if i < 0 || j < 0 {
		return 0, 0, errors.New("stat: malformed")
	}
	if pid, err = strconv.Atoi(string(b[:j])); err != nil {
		return 0, 0, err
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, 0, errors.New("stat: short")
	}
	ppid, err = strconv.Atoi(f[1])
	return pid, ppid, err
}

// OpenDescriptors counts the descriptors process pid has open.
func OpenDescriptors(pid int) (int, error) {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, fmt.Errorf("count descriptors: %w", err)
	}
	return len(entries), nil
}
