package scenario

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/monolock/monolock/bench/report"
	"github.com/monolock/monolock/internal/testsupport/proc"
)

// cycleCPURuns is how many times each system's cycles are measured; the
// three alternate, and each row is the median, so that a burst of foreign
// load falls on all of them or is outvoted.
const cycleCPURuns = 3

// cycleCPURows adds S1's rows of server CPU per cycle: monolock against both
// floors, in the same run. A lock is a connection, so the accept path is
// most of a cycle; the floors are the cheapest possible server behind gnet's
// own acceptor (which stops at EMFILE) and behind an EMFILE-safe Go
// listener feeding gnet with EnrollContext.
func (b *Run) cycleCPURows(sc *report.Scenario) {
	type system struct {
		name, key string
		mode      cycleMode
		start     func(tag string) (*proc.Process, error)
		got       []float64 // µs per cycle, one per run
		err       error
	}
	systems := []*system{
		{name: report.SysMonolock, key: report.KeyCPUCycle, mode: cycleAcquire, start: b.srv.monolock},
		{name: report.SysFloorSafe, key: report.KeyCPUCycleSafe, mode: cycleRequest, start: b.srv.floorGoAccept},
		{name: report.SysBareGnet, key: report.KeyCPUCycleGnet, mode: cycleRequest, start: b.srv.floor},
	}
	for run := range cycleCPURuns {
		for _, sys := range systems {
			if sys.err != nil {
				continue
			}
			b.step(fmt.Sprintf("S1 server CPU per cycle, %s, run %d", sys.name, run+1))
			us, err := b.cpuPerCycle(sys.start, sys.mode, fmt.Sprintf("s1-cpu-%d", run))
			if err != nil {
				sys.err = err
				continue
			}
			sys.got = append(sys.got, us)
		}
	}
	for _, sys := range systems {
		figure := "server CPU per cycle"
		if sys.err != nil {
			b.failRow(sc, sys.name, figure, "S1 "+sys.name, sys.err)
			continue
		}
		slices.Sort(sys.got)
		floor := sys.key
		if sys.name == report.SysMonolock {
			floor = report.KeyCPUCycleSafe
		}
		sc.Add(&report.Row{System: sys.name, Figure: figure, Value: sys.got[len(sys.got)/2], Unit: "µs", Lower: true,
			Key: sys.key, Floor: floor, Note: fmt.Sprintf("median of %d: %s", len(sys.got), formatMicros(sys.got))})
	}
	sc.Note("server CPU per cycle: the server's utime+stime over the window ÷ cycles completed in it, median of %d alternating runs; the floors answer 1 byte with 9 bytes (monolock's cycle adds the lock); ×floor for monolock is against %q (EMFILE-safe), the summary also gives it against %q (gnet's acceptor, which stops at EMFILE)",
		cycleCPURuns, report.SysFloorSafe, report.SysBareGnet)
}

func (b *Run) cpuPerCycle(start func(string) (*proc.Process, error), mode cycleMode, tag string) (float64, error) {
	p, err := start(tag)
	if err != nil {
		return 0, err
	}
	defer p.Stop()
	win := b.clock.Window(b.sz.warm, b.sz.dur)
	var l *cycleLoad
	if mode == cycleAcquire {
		l = newCycleLoad(mode, b.sz.workers, b.sz.holdLease, tag, b.checker("S1 cpu "+tag), win)
	} else {
		l = newCycleLoad(mode, b.sz.workers, 0, "", nil, win)
	}
	r, ok, err := timedUsage(b.clock, p.Pid(), win, func() error { return runLoad(b.clock, p.Addr, l) })
	if err != nil {
		return 0, err
	}
	if !ok || len(r.CPU) == 0 || l.count == 0 {
		return 0, fmt.Errorf("no CPU sample or no cycle in the window (%d cycles)", l.count)
	}
	return float64(r.CPU[0]) / float64(time.Microsecond) / float64(l.count), nil
}

func formatMicros(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprintf("%.1f", x)
	}
	return strings.Join(s, ", ") + " µs"
}
