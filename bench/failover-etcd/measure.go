package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/monolock/monolock/bench/internal/failkit"
)

// observation is what the harness saw of one round.
type observation struct {
	fault   fault
	ttl     time.Duration
	lease   time.Duration
	clients int
	leader  *nodeRun // the run leading at the fault
	// faultAt is the fault's moment; from is the moment D runs from (the
	// fault, the SIGKILL after the clock step, or the repair).
	faultAt, from time.Time
	stepDown      time.Duration // silent faults: fault to the leader's /readyz no longer 200, as polled (-1: never)
	events        []failkit.Event
	runs          []runGrants // every run of every node, all of its grants
}

// etcdElectionTimeout is etcd's default --election-timeout, which the
// harness keeps: a raft leader that lost its quorum goes on answering
// lease keepalives until CheckQuorum, which looks once per election
// timeout, makes it step down.
const etcdElectionTimeout = time.Second

// slack is the scheduling allowance for "no grant after the leader's
// deadline": the servers and the harness share one clock, but a grant
// stamped just before the deadline is written a moment later.
const slack = 100 * time.Millisecond

// row is one round's line of the results.
type row struct {
	Fault         string
	D             time.Duration
	DFound        bool          // a grant came that D could measure
	StepDown      time.Duration // silent faults only
	Overlaps      int
	TokensOK      bool
	StaleLanded   int
	StaleRejected int
	Grants        int  // grants of every run from the fault on
	TermEnded     bool // keepTerm faults: another run granted after the fault
	violations    []string
}

func (r row) String() string {
	d := "no grant"
	if r.DFound {
		d = r.D.Round(time.Millisecond).String()
	}
	s := fmt.Sprintf("D %s, overlapping holders %d, tokens %s, stale writes landed %d (rejected %d), %d grants from the fault on",
		d, r.Overlaps, okWord(r.TokensOK), r.StaleLanded, r.StaleRejected, r.Grants)
	if r.TermEnded {
		s += ", the leader's term ended"
	}
	if r.StepDown != 0 {
		s += ", leader stepped down after " + r.StepDown.Round(time.Millisecond).String()
	}
	return s
}

func okWord(ok bool) string {
	if ok {
		return "strictly increasing"
	}
	return "NOT INCREASING"
}

// measure turns an observation into a row and lists the violations.
func measure(o observation) row {
	r := row{Fault: o.fault.name, StepDown: o.stepDown, TokensOK: true}
	add := func(format string, args ...any) {
		r.violations = append(r.violations, fmt.Sprintf(format, args...))
	}
	for _, ov := range failkit.Overlaps(o.events) {
		r.Overlaps++
		if r.Overlaps <= 3 {
			add("overlapping holders: %v", ov)
		}
	}
	if r.StaleLanded = failkit.StaleLanded(o.events); r.StaleLanded > 0 {
		add("%d stale writes landed at the fenced resource", r.StaleLanded)
	}
	r.StaleRejected = failkit.StaleRejected(o.events)

	// Tokens: each run's log strictly increasing.
	for _, rg := range o.runs {
		if err := failkit.Increasing(rg.grants); err != nil {
			r.TokensOK = false
			add("%s: %v", rg.name(), err)
		}
		for _, g := range rg.grants {
			if !g.At.Before(o.faultAt) {
				r.Grants++
			}
		}
	}
	// The term that serves next: the first grant at or after from, of
	// another run than the leader's when the fault is a takeover (or, for
	// a fault the leader should survive, when it did not).
	var next *runGrants
	var first failkit.Grant
	for i := range o.runs {
		rg := &o.runs[i]
		if o.fault.expect != afterRepair && rg.run == o.leader {
			continue
		}
		for _, g := range rg.grants {
			if !g.At.Before(o.from) && (next == nil || g.At.Before(first.At)) {
				next, first = rg, g
			}
		}
	}
	switch o.fault.expect {
	case keepTerm:
		r.D, r.DFound = longestGap(o.runs, o.faultAt), true
		r.TermEnded = next != nil // an availability note, checked as a takeover below
	case afterRepair:
		// The leader may have granted, during a cut, to a waiter whose
		// client had already given up: D is when a client was served again.
		r.D, r.DFound = firstGrantSeen(o.events, o.from)
	default:
		if next != nil {
			r.D, r.DFound = first.At.Sub(o.from), true
		}
	}
	if next == nil && o.fault.expect != keepTerm {
		add("no grant after the fault")
	}
	if next != nil {
		// Above every token of every other run, and no other run granting
		// after it: one term at a time, tokens increasing across them.
		for _, rg := range o.runs {
			if rg.run == next.run {
				continue
			}
			var top uint64
			var late *failkit.Grant
			for i, g := range rg.grants {
				top = max(top, g.Token)
				if late == nil && !g.At.Before(first.At) {
					late = &rg.grants[i]
				}
			}
			if len(rg.grants) > 0 && top >= first.Token {
				r.TokensOK = false
				add("%s's first grant of its term, token %d, is not above %s's token %d", next.name(), first.Token, rg.name(), top)
			}
			if late != nil {
				add("%s granted at %s, after %s's term began at %s", rg.name(), late.At.Format("15:04:05.000"), next.name(), first.At.Format("15:04:05.000"))
			}
		}
	}
	if o.fault.silent {
		// etcd's raft leader renews leases by itself until it notices
		// that it lost the quorum (CheckQuorum, looked at once per
		// election timeout: up to two of them), so the leader's last
		// answered keepalive may come that much after the fault.
		latest := o.faultAt.Add(2 * etcdElectionTimeout).Add(o.ttl * 8 / 10).Add(slack)
		stepped := o.faultAt.Add(o.stepDown)
		switch {
		case o.stepDown < 0:
			add("the leader did not step down within 3 × ttl of losing etcd's quorum")
		case stepped.After(latest):
			add("the leader stepped down %v after etcd's quorum was lost, later than 2 × etcd's election timeout + 0.8 × ttl", o.stepDown.Round(time.Millisecond))
		}
		if o.stepDown >= 0 {
			for _, rg := range o.runs {
				for _, g := range rg.grants {
					if g.At.After(stepped.Add(slack)) && g.At.Before(o.from) {
						add("%s granted lock %s at %s, with etcd's quorum lost, after the leader stepped down at %s", rg.name(), g.Lock,
							g.At.Format("15:04:05.000"), stepped.Format("15:04:05.000"))
					}
				}
			}
		}
	}
	return r
}

// firstGrantSeen is the time from t to the first grant a client saw at or
// after t.
func firstGrantSeen(events []failkit.Event, t time.Time) (time.Duration, bool) {
	var first int64
	for _, e := range events {
		if e.Kind == "granted" && e.At >= t.UnixNano() && (first == 0 || e.At < first) {
			first = e.At
		}
	}
	if first == 0 {
		return 0, false
	}
	return time.Unix(0, first).Sub(t), true
}

// longestGap is the longest time without a grant, of any run, from t to
// the last grant.
func longestGap(runs []runGrants, t time.Time) time.Duration {
	var ats []time.Time
	for _, rg := range runs {
		for _, g := range rg.grants {
			if g.At.After(t) {
				ats = append(ats, g.At)
			}
		}
	}
	if len(ats) == 0 {
		return time.Duration(math.MaxInt64)
	}
	slices.SortFunc(ats, time.Time.Compare)
	gap := ats[0].Sub(t)
	for i := 1; i < len(ats); i++ {
		gap = max(gap, ats[i].Sub(ats[i-1]))
	}
	return gap
}

// summarize is the table of the run, one row per fault, in Markdown.
func summarize(rows []row, c config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| fault | rounds | D min / median / max | overlapping holders | tokens strictly increasing | stale writes landed | stale writes rejected | leader stepped down after (median) | leader's term ended |\n")
	fmt.Fprintf(&b, "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, f := range faults {
		var ds, steps []time.Duration
		overlaps, landed, rejected, ordered, n, missing, ended := 0, 0, 0, 0, 0, 0, 0
		for _, r := range rows {
			if r.Fault != f.name {
				continue
			}
			n++
			if r.DFound {
				ds = append(ds, r.D)
			} else {
				missing++
			}
			if r.StepDown > 0 {
				steps = append(steps, r.StepDown)
			}
			overlaps += r.Overlaps
			landed += r.StaleLanded
			rejected += r.StaleRejected
			if r.TokensOK {
				ordered++
			}
			if r.TermEnded {
				ended++
			}
		}
		if n == 0 {
			continue
		}
		d := fmt.Sprintf("%s / %s / %s", failkit.Seconds(failkit.MinOf(ds)), failkit.Seconds(failkit.Median(ds)), failkit.Seconds(failkit.MaxOf(ds)))
		if missing > 0 {
			d += fmt.Sprintf(" (%d rounds without a grant)", missing)
		}
		step := "—"
		if len(steps) > 0 {
			step = failkit.Seconds(failkit.Median(steps))
		}
		term := "—"
		switch f.expect {
		case takeover:
			term = "every round"
		case keepTerm:
			term = fmt.Sprintf("%d of %d", ended, n)
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %d | %d of %d | %d | %d | %s | %s |\n", f.name, n, d, overlaps, ordered, n, landed, rejected, step, term)
	}
	fmt.Fprintf(&b, "\nD: from the fault to the first grant of another node's term (takeovers); the longest time without a grant from the fault on (the etcd member killed: the leader keeps its term); from the repair to the first grant (clients cut off, quorum lost: nothing serves them until then). "+
		"%d clients over %d locks, lease %v (the new leader's wait is the lease less 0.2 × ttl), -ha-ttl %v (a leader stops 0.8 × ttl after its last answered keepalive and keeps its key 0.2 × ttl after that), outages %v; every process shares this machine's clock, the servers' audit times corrected for the offsets the harness gave them.\n",
		c.Clients, c.Locks, c.Lease, c.ttl, c.outage)
	return b.String()
}
