package scenario

import (
	"errors"
	"fmt"
	"github.com/monolock/monolock/bench/check"
	"github.com/monolock/monolock/bench/clock"
	"github.com/monolock/monolock/bench/procstat"
	"github.com/monolock/monolock/bench/report"
	"github.com/monolock/monolock/internal/testsupport/proc"
	"time"
)

// churnResult is one S5 repetition.
type churnResult struct {
	total time.Duration // first close → sentinel's grant
	cpu   time.Duration // server CPU over the same span
	setup time.Duration // queueing the waiters
}

// runChurn starts the S5 load l (sig its signals) against srv and waits
// until it is in place, samples the server's CPU, says go and waits for the
// load to end. It returns the setup time and the sample taken before go;
// notReady says what was not in place at the setup deadline.
func runChurn(clk clock.Clock, srv *proc.Process, l starter, sig *churnSignals, w int, notReady string) (setup time.Duration, before procstat.Sample, err error) {
	run, setup, err := startLoadWhenReady(clk, srv.Addr, l, &sig.ready, w, 2*time.Millisecond, notReady)
	if err != nil {
		return 0, before, err
	}
	time.Sleep(50 * time.Millisecond) // let the server settle
	before, err = procstat.Read(srv.Pid())
	if err != nil {
		_ = run.Stop()
		return setup, before, err
	}
	sig.goNow.Store(true)
	return setup, before, run.Wait()
}

// measureChurn runs one S5 repetition with w waiters against srv.
func measureChurn(clk clock.Clock, srv *proc.Process, w int, seed uint64, chk *check.Checker) (churnResult, error) {
	var res churnResult
	l := newChurnLoad(w, fmt.Sprintf("s5-%d-%d", w, seed), seed, chk)
	setup, a, err := runChurn(clk, srv, l, &l.churnSignals, w, "waiters not all queued")
	res.setup = setup
	if err != nil {
		return res, err
	}
	z, err := procstat.Read(srv.Pid())
	if err != nil {
		return res, err
	}
	if !l.done.Load() {
		return res, errors.New("the sentinel was never granted")
	}
	res.total = time.Duration(l.tEnd - l.t0)
	res.cpu = procstat.CPUDelta(a, z)
	return res, nil
}

// measureFloorChurn closes w connections to the bare gnet server and
// returns the server's CPU for them, sampled once it has been quiet for a
// while after the sentinel's answer.
func measureFloorChurn(clk clock.Clock, srv *proc.Process, w int, seed uint64) (churnResult, error) {
	var res churnResult
	l := newFloorChurnLoad(w, seed)
	setup, a, err := runChurn(clk, srv, l, &l.churnSignals, w, "connections not all answered")
	res.setup = setup
	if err != nil {
		return res, err
	}
	if !l.done.Load() {
		return res, errors.New("the sentinel was never answered")
	}
	// Wait until the server's CPU stops moving: the closes it had not yet
	// seen when it answered the sentinel are then done too.
	z, err := procstat.Read(srv.Pid())
	for range 50 {
		if err != nil {
			return res, err
		}
		time.Sleep(20 * time.Millisecond)
		var next procstat.Sample
		next, err = procstat.Read(srv.Pid())
		if err == nil && procstat.CPUDelta(z, next) < 200*time.Microsecond {
			z = next
			break
		}
		z = next
	}
	res.total = time.Duration(l.tEnd - l.t0)
	res.cpu = procstat.CPUDelta(a, z)
	return res, nil
}

// s5: W waiters on one lock leave in random order.
func (b *Run) s5() *report.Scenario {
	sz := b.sz
	sc := &report.Scenario{ID: "S5", Name: "queue churn", Desc: fmt.Sprintf(
		"W waiters queued on one lock close in random order, then the holder; a sentinel queued last marks the end; median of %d", sz.s5Reps)}
	ml, err := b.srv.monolock("s5")
	if err != nil {
		b.failRow(sc, report.SysMonolock, "departures", "S5", err)
		return sc
	}
	defer ml.Stop()
	var ref, lastCPU float64
	lastCPURow := -1
	for _, w := range sz.s5Queues {
		b.step(fmt.Sprintf("S5 W=%s", report.GroupThousands(int64(w))))
		chk := b.checker(fmt.Sprintf("S5 W=%d", w))
		var totals, cpus, setups []time.Duration
		var failed error
		for rep := range sz.s5Reps {
			r, err := measureChurn(b.clock, ml, w, uint64(rep+1), chk)
			if err != nil {
				failed = err
				break
			}
			totals = append(totals, r.total)
			cpus = append(cpus, r.cpu)
			setups = append(setups, r.setup)
		}
		at := "W=" + report.GroupThousands(int64(w))
		if failed != nil {
			b.failRow(sc, report.SysMonolock, "time per departure, "+at, "S5 "+at, failed)
			continue
		}
		total := median(totals)
		per := float64(total) / float64(w) / 1e3 // µs
		if ref == 0 {
			ref = per
		}
		cpuPer := float64(median(cpus)) / float64(w) / 1e3
		sc.Add(&report.Row{System: report.SysMonolock, Figure: "time per departure, " + at, Value: per, Unit: "µs", Lower: true,
			Note: fmt.Sprintf("total %s · %.2f× the smallest W · queueing took %s", report.FormatDuration(int64(total)), per/ref,
				report.FormatDuration(int64(median(setups))))})
		sc.Add(&report.Row{System: report.SysMonolock, Figure: "server CPU per departure, " + at, Value: cpuPer, Unit: "µs", Lower: true})
		lastCPU, lastCPURow = cpuPer, len(sc.Rows)-1
	}
	// The floor: the same closes against the bare gnet server (no queue).
	if len(sz.s5Queues) > 0 {
		w := sz.s5Queues[len(sz.s5Queues)-1]
		b.step(fmt.Sprintf("S5 bare gnet W=%s", report.GroupThousands(int64(w))))
		at := "W=" + report.GroupThousands(int64(w))
		func() {
			fl, err := b.srv.floor("s5")
			if err != nil {
				b.failRow(sc, report.SysBareGnet, "server CPU per close, "+at, "S5 floor", err)
				return
			}
			defer fl.Stop()
			var cpus []time.Duration
			for rep := range sz.s5Reps {
				r, err := measureFloorChurn(b.clock, fl, w, uint64(rep+1))
				if err != nil {
					b.failRow(sc, report.SysBareGnet, "server CPU per close, "+at, "S5 floor "+at, err)
					return
				}
				cpus = append(cpus, r.cpu)
			}
			cpuPer := float64(median(cpus)) / float64(w) / 1e3
			sc.Add(&report.Row{System: report.SysBareGnet, Figure: "server CPU per close, " + at, Value: cpuPer, Unit: "µs", Lower: true,
				Key: "close", Floor: "close",
				Note: "the same closes against gnet alone: what the kernel and gnet cost per departure"})
			if lastCPU > 0 {
				v := lastCPU / cpuPer
				sc.Rows[lastCPURow].VsFloor = &v
			}
		}()
	}
	sc.Note("a departure is a waiter closing its connection: the server reads end of stream, closes the socket and unlinks the waiter from the queue")
	sc.Note("flat means the per-departure figures do not grow with W (removal from the middle of the queue is O(1))")
	return sc
}
