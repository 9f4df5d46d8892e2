package scenario

import (
	"context"
	"errors"
	"fmt"
	"github.com/monolock/monolock/bench/hist"
	"github.com/monolock/monolock/bench/peers"
	"github.com/monolock/monolock/bench/report"
	"slices"
	"sync"
	"time"
)

func keyExpiry(lease time.Duration) string { return "expiry " + lease.String() }

// overshootRow turns overshoots into a row: value = median overshoot in ms.
func overshootRow(sys string, lease time.Duration, os []time.Duration, note string) *report.Row {
	var h hist.Histogram
	for _, d := range os {
		h.RecordDuration(max(d, 0))
	}
	s := h.Summarize()
	lo := slices.Min(os)
	n := fmt.Sprintf("n=%d, min %s", len(os), report.FormatDuration(int64(lo)))
	if note != "" {
		n += " · " + note
	}
	return &report.Row{System: sys, Figure: "overshoot, lease " + report.DurMS(lease), Value: float64(s.P50) / 1e6, Unit: "ms",
		Lat: &s, Key: keyExpiry(lease), Lower: true, Note: n}
}

// s4: a holder goes silent; how long after its lease does the waiter get in?
func (b *Run) s4() *report.Scenario {
	sz := b.sz
	sc := &report.Scenario{ID: "S4", Name: "expiry", Desc: fmt.Sprintf(
		"a holder heartbeats twice then goes silent (socket open); one waiter; overshoot = waiter's grant − (holder's last heartbeat + lease); %d repetitions per lease, all at once",
		sz.s4Reps)}
	b.step("S4 monolock")
	func() {
		ml, err := b.srv.monolock("s4")
		if err != nil {
			b.failRow(sc, report.SysMonolock, "overshoot", "S4", err)
			return
		}
		defer ml.Stop()
		chk := b.checker("S4 monolock")
		l := newExpiryLoad(b.clock, sz.s4Leases, sz.s4Reps, chk)
		if err := runLoad(b.clock, ml.Addr, l); err != nil {
			b.failRow(sc, report.SysMonolock, "overshoot", "S4 monolock", err)
			return
		}
		for _, lease := range sz.s4Leases {
			var os, drops []time.Duration
			for _, c := range l.cases {
				if c.lease == lease {
					os = append(os, c.Overshoot())
					drops = append(drops, time.Duration(c.dropAt-c.lastBeat-int64(lease)))
				}
			}
			sc.Add(overshootRow(report.SysMonolock, lease, os, "holder's close seen at lease + "+report.FormatDuration(int64(median(drops)))))
		}
	}()
	for _, p := range b.peers {
		b.step("S4 " + p.Name())
		chk := b.checker("S4 " + p.Name())
		type out struct {
			res peers.ExpiryResult
			err error
		}
		outs := make([]out, len(sz.s4Leases))
		var wg sync.WaitGroup
		for i, lease := range sz.s4Leases {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 3*lease+30*time.Second)
				defer cancel()
				r, err := p.Expiry(ctx, lease, sz.s4Reps, chk)
				outs[i] = out{r, err}
			})
		}
		wg.Wait()
		for i, lease := range sz.s4Leases {
			o := outs[i]
			var unsup peers.ErrLeaseUnsupported
			switch {
			case errors.Is(o.err, peers.ErrNoLease):
				sc.Add(&report.Row{System: p.Name(), Figure: "overshoot, lease " + report.DurMS(lease), Status: "n/a",
					Note: "no lease: an advisory lock lives until its session ends; a silent holder keeps it"})
			case errors.As(o.err, &unsup):
				sc.Add(&report.Row{System: p.Name(), Figure: "overshoot, lease " + report.DurMS(lease), Status: "n/a", Note: unsup.Why})
			case o.err != nil:
				b.failRow(sc, p.Name(), "overshoot, lease "+report.DurMS(lease), fmt.Sprintf("S4 %s lease %v", p.Name(), lease), o.err)
			default:
				r := overshootRow(p.Name(), lease, o.res.Overshoots, o.res.Note)
				if o.res.Lease != lease {
					r.Key = "" // not the same lease as monolock's row: no ratio
				}
				sc.Add(r)
			}
		}
	}
	b.skippedRows(sc, "overshoot")
	sc.Note("latency columns: the overshoot distribution; a negative overshoot (a grant before the lease ended) fails the run")
	sc.Note("monolock checks leases on a 1 ms timer wheel; Redis expires the key on the next access after PX; etcd revokes expired leases through raft")
	return sc
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
