package main

import (
	"strings"
	"testing"
	"time"

	"github.com/monolock/monolock/bench/internal/failkit"
)

var t0 = time.Unix(1_800_000_000, 0)

func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

func faultNamed(t *testing.T, prefix string) fault {
	t.Helper()
	for _, f := range faults {
		if strings.HasPrefix(f.name, prefix) {
			return f
		}
	}
	t.Fatalf("no fault %q", prefix)
	return fault{}
}

// A takeover: D runs to the first grant of the other node's run; a first
// token not above the old run's, and an old run granting after the new
// term began, are both named; a healthy round has no violation.
func TestMeasureTakeover(t *testing.T) {
	a1, b1 := &nodeRun{node: "n1", audit: "/x/audit-1.jsonl"}, &nodeRun{node: "n2", audit: "/x/audit-1.jsonl"}
	o := observation{
		fault: faultNamed(t, "SIGKILL"), ttl: 3 * time.Second, lease: time.Second, leader: a1, faultAt: ms(0), from: ms(0),
		runs: []runGrants{
			{run: a1, grants: []failkit.Grant{{Lock: "x", Token: 100, At: ms(-500)}, {Lock: "y", Token: 101, At: ms(-10)}}},
			{run: b1, grants: []failkit.Grant{{Lock: "x", Token: 200, At: ms(3200)}, {Lock: "y", Token: 201, At: ms(3300)}}},
		},
	}
	r := measure(o)
	if len(r.violations) != 0 || !r.TokensOK || !r.DFound || r.D != 3200*time.Millisecond || r.Grants != 2 {
		t.Fatalf("healthy takeover: %+v", r)
	}
	o.runs[1].grants[0].Token = 101
	o.runs[0].grants = append(o.runs[0].grants, failkit.Grant{Lock: "z", Token: 102, At: ms(3250)})
	r = measure(o)
	got := strings.Join(r.violations, "; ")
	for _, want := range []string{"token 101, is not above n1 audit-1's token 102", "n1 audit-1 granted at "} {
		if !strings.Contains(got, want) {
			t.Errorf("violations %q lack %q", got, want)
		}
	}
	if r.TokensOK {
		t.Error("tokens reported increasing")
	}
	// The leader's own grants after the fault do not end its term's count:
	// only another run's first grant does; none is a violation.
	o.runs = o.runs[:1]
	if r := measure(o); r.DFound || !strings.Contains(strings.Join(r.violations, ";"), "no grant after the fault") {
		t.Errorf("no takeover: %+v", r)
	}
}

// Quorum lost: a grant after the leader stepped down and before the
// repair is a violation, one before it is not; a step-down later than
// 2 × etcd's election timeout + 0.8 × ttl is one too; D runs from the repair to
// the first grant a client saw.
func TestMeasureSilent(t *testing.T) {
	a1 := &nodeRun{node: "n1", audit: "/x/audit-1.jsonl"}
	o := observation{
		fault: faultNamed(t, "etcd quorum"), ttl: 3 * time.Second, leader: a1, faultAt: ms(0), from: ms(6000), stepDown: 2 * time.Second,
		runs:   []runGrants{{run: a1, grants: []failkit.Grant{{Lock: "x", Token: 1, At: ms(2000)}, {Lock: "x", Token: 2, At: ms(6500)}}}},
		events: []failkit.Event{{Kind: "granted", C: 0, Hold: 1, Lock: "x", Token: 2, At: ms(6510).UnixNano()}},
	}
	if r := measure(o); len(r.violations) != 0 || r.D != 510*time.Millisecond {
		t.Fatalf("healthy: %+v", r)
	}
	o.runs[0].grants[0].At = ms(2200) // after the step-down (2 s) + slack
	if r := measure(o); len(r.violations) != 1 || !strings.Contains(r.violations[0], "quorum lost, after the leader stepped down") {
		t.Fatalf("grant in the outage: %+v", r)
	}
	o.runs[0].grants[0].At = ms(1000)
	o.stepDown = 4600 * time.Millisecond // past 2 × 1 s + 2.4 s + slack
	if r := measure(o); len(r.violations) != 1 || !strings.Contains(r.violations[0], "later than 2 × etcd's election timeout") {
		t.Fatalf("late step-down: %+v", r)
	}
	o.stepDown = -1
	if r := measure(o); len(r.violations) != 1 || !strings.Contains(r.violations[0], "did not step down") {
		t.Fatalf("no step-down: %+v", r)
	}
}

// The etcd member killed: D is the longest time without a grant; another
// run granting means the fault ended the leader's term.
func TestMeasureKeepTerm(t *testing.T) {
	a1, b1 := &nodeRun{node: "n1", audit: "/x/audit-1.jsonl"}, &nodeRun{node: "n2", audit: "/x/audit-1.jsonl"}
	o := observation{
		fault: faultNamed(t, "etcd raft leader"), ttl: 3 * time.Second, leader: a1, faultAt: ms(0), from: ms(0),
		runs: []runGrants{{run: a1, grants: []failkit.Grant{{Token: 1, At: ms(100)}, {Token: 2, At: ms(900)}, {Token: 3, At: ms(1000)}}}, {run: b1}},
	}
	if r := measure(o); len(r.violations) != 0 || r.D != 800*time.Millisecond {
		t.Fatalf("healthy: %+v", r)
	}
	// Another run took over: not a violation but a note, and the takeover
	// is checked as one (its token here is not above the old run's).
	o.runs[1].grants = []failkit.Grant{{Token: 3, At: ms(1100)}}
	if r := measure(o); !r.TermEnded || len(r.violations) != 1 || !strings.Contains(r.violations[0], "is not above n1 audit-1's token 3") {
		t.Fatalf("term ended: %+v", r)
	}
}

// A server's audit times, read while its clock was offset, map back onto
// the harness's clock.
func TestHarnessTime(t *testing.T) {
	r := &nodeRun{started: ms(0), offsets: []offsetChange{{at: ms(1000), offset: -time.Hour}, {at: ms(5000), offset: 0}}}
	for _, c := range []struct{ read, want time.Time }{
		{ms(500), ms(500)},
		{ms(2000).Add(-time.Hour), ms(2000)},
		{ms(6000), ms(6000)},
	} {
		if got := r.harnessTime(c.read, ms(10_000)); !got.Equal(c.want) {
			t.Errorf("read %v: got %v, want %v", c.read, got, c.want)
		}
	}
}
