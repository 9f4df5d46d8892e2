package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/monolock/monolock/bench/internal/failkit"
)

// A round with one holder of the old primary that stops in time, one that
// stops too late, a double grant at the resource, a stale write, and a
// standby whose first token is not above the old primary's: every column
// counts it and every violation is named.
func TestMeasure(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	at := func(d time.Duration) int64 { return t0.Add(d).UnixNano() }
	o := observation{
		fault: faultKill, lease: time.Second, slack: 100 * time.Millisecond, clients: 3,
		faultAt: t0, confirmEnd: t0, vipArrived: t0.Add(2 * time.Second), fencedAt: t0.Add(time.Second),
		oldGrants: []failkit.Grant{{Lock: "x", Token: 100, At: t0.Add(-time.Second)}},
		newGrants: []failkit.Grant{{Lock: "x", Token: 90, At: t0.Add(3 * time.Second)}, {Lock: "y", Token: 200, At: t0.Add(4 * time.Second)}},
		events: []failkit.Event{
			{Kind: "granted", C: 0, Hold: 1, Lock: "x", Token: 100, At: at(-time.Second)},
			{Kind: "ended", C: 0, Hold: 1, Lock: "x", Token: 100, At: at(800 * time.Millisecond)}, // in time (0.8 s + slack)
			{Kind: "granted", C: 1, Hold: 1, Lock: "y", Token: 101, At: at(-time.Second)},
			{Kind: "ended", C: 1, Hold: 1, Lock: "y", Token: 101, At: at(time.Second)}, // late
			{Kind: "write", C: 1, Hold: 1, Lock: "y", Token: 101, OK: true, At: at(-500 * time.Millisecond)},
			{Kind: "write", C: 2, Hold: 1, Lock: "y", Token: 101, OK: true, At: at(-400 * time.Millisecond)}, // same token, other hold
			{Kind: "write", C: 0, Hold: 1, Lock: "x", Token: 100, OK: false, At: at(500 * time.Millisecond)},
			{Kind: "answered", C: 0, At: at(2500 * time.Millisecond)},
			{Kind: "answered", C: 1, At: at(3 * time.Second)},
			{Kind: "answered", C: 2, At: at(time.Second)}, // before the move: not back yet
		},
	}
	r := measure(o)
	if r.D != 3*time.Second || r.Readmit != 3*time.Second || r.LateHolders != 1 || r.StaleRejected != 1 ||
		r.DoubleGrants != 1 || r.TokenOrder || !r.Fenced || r.NotReadmitted != 1 || r.OldMax != 101 {
		t.Errorf("row %+v", r)
	}
	for _, want := range []string{"not above", "still held", "double grants", "never held or queued"} {
		if !strings.Contains(strings.Join(r.violationReason, "; "), want) {
			t.Errorf("violations %q lack %q", r.violationReason, want)
		}
	}

	// The same round, healthy: no violation.
	o.newGrants[0].Token = 300
	o.events = append(o.events[:3], failkit.Event{Kind: "ended", C: 1, Hold: 1, Lock: "y", Token: 101, At: at(time.Millisecond)},
		failkit.Event{Kind: "answered", C: 2, At: at(2 * time.Second)})
	o.events = append(o.events, failkit.Event{Kind: "answered", C: 0, At: at(2500 * time.Millisecond)}, failkit.Event{Kind: "answered", C: 1, At: at(3 * time.Second)})
	if r := measure(o); len(r.violationReason) != 0 || !r.TokenOrder {
		t.Errorf("healthy round: %+v", r)
	}
	// A client in a long pause at the fault comes back late: that is the
	// pause, not the pair, and does not count towards the time.
	o.events = append(o.events, failkit.Event{Kind: "paused", C: 2, At: at(-time.Second), Until: at(5 * time.Second)})
	o.events[4] = failkit.Event{Kind: "answered", C: 2, At: at(6 * time.Second)}
	if r := measure(o); r.Readmit != 3*time.Second || r.NotReadmitted != 0 {
		t.Errorf("paused client: %+v", r)
	}
	// A fence call that did not stop the process is no fence.
	o.oldAlive = true
	if r := measure(o); r.Fenced || len(r.violationReason) != 1 {
		t.Errorf("old primary alive: %+v", r)
	}
}

// The shipped keepalived.conf renders for both hosts, only paths, router id,
// priority and unicast addresses changing.
func TestRenderKeepalived(t *testing.T) {
	shipped, err := os.ReadFile(filepath.Join("..", "..", "deploy", "keepalived", "keepalived.conf"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := renderKeepalived(string(shipped), "/x", "a")
	if err != nil {
		t.Fatal(err)
	}
	if a != strings.ReplaceAll(string(shipped), "/etc/keepalived/", "/x/") {
		t.Error("host a: more than the script paths changed")
	}
	b, err := renderKeepalived(string(shipped), "/x", "b")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"router_id monolock_b", "priority 100", "unicast_src_ip 192.0.2.12", "\n        192.0.2.11 ", `"/x/check_monolock.sh"`, `"/x/notify_monolock.sh"`} {
		if !strings.Contains(b, want) {
			t.Errorf("host b's configuration lacks %q", want)
		}
	}
	if _, err := renderKeepalived("vrrp_instance x {}", "/x", "b"); err == nil {
		t.Error("a configuration without the expected lines rendered")
	}
}
