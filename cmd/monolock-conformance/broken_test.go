package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/monolock/monolock/internal/testsupport/proc"
)

// mutants is the kit's mutation table (docs/conformance.md): each fault of
// the broken driver, the scenario that kills it and the rule the failure
// names.
var mutants = []struct {
	fault, scenario, rule string
}{
	{"slow-heartbeat", "heartbeat-fast", "rule 3 (heartbeat every lease/4)"},
	{"no-smoothing", "heartbeat-rtt", "rule 3 (EWMA α = 0.2: the RTT average falls gradually)"},
	{"interval-after-reply", "heartbeat-rtt", "rule 3 (interval = lease/4 − 2 × smoothed RTT, from send to send)"},
	{"never-give-up", "give-up-holding", "rule 8 (give up on silence)"},
	{"close-at-give-up", "give-up-holding", "give-up (closed only once the work has stopped)"},
	{"give-up-0.9", "give-up-late-answer", "rule 8 (give up 0.8 × lease after the send of the newest answered request, not later)"},
	{"give-up-0.95", "give-up-late-answer", "rule 8 (give up 0.8 × lease after the send of the newest answered request, not later)"},
	{"give-up-from-receipt", "give-up-delayed-answer", "rule 8 (give up 0.8 × lease after the send of the newest answered request)"},
	{"no-jitter", "error-0x01-random-wait", "rule 6 (a random wait, uniform in [0, min(1 s, lease/4)], after 0x01)"},
	{"waiting-after-grant", "waiting-after-grant", "rules 4, 7 (WAITING while holding is a protocol violation: a loss at once)"},
	{"changed-token", "changed-token", "rules 4, 7 (ACQUIRED with another token while holding is a protocol violation: a loss at once)"},
	{"fin-release", "release-server-closes-first", "release (RELEASE before the end of stream)"},
	{"error-after-release", "release-old-server", "release (ERROR 0x13 after RELEASE is the end, not an error)"},
	{"release-fin-at-bound", "release-server-never-closes", "release (no TIME_WAIT on the client)"},
	{"lease-overflow", "lease-max", "frames (every lease the wire allows is accepted)"},
	{"late-push-violation", "late-answer-then-push", "rules 1, 4 (a push after a late answer is a grant, not a second answer)"},
	{"late-0x01-no-retry", "late-answer-then-0x01", "rule 6 (ERROR 0x01 after a late answer: reconnect under run)"},
	{"late-error-no-code", "late-answer-then-0x02", "rule 8 (ERROR 0x02 after a late answer is a loss with its code)"},
	{"error-before-deadline", "give-up-error-after-deadline", "the order of simultaneous things (a deadline that has passed is taken before a frame read at the same time)"},
}

// TestBrokenDriverFails shows that the kit kills every mutant of its
// mutation table: the broken driver with that fault fails the scenario of
// the rule it breaks, through the command line as a user runs it, and the
// failure names the rule.
func TestBrokenDriverFails(t *testing.T) {
	t.Parallel()
	bin := proc.MustBinary(t, "./internal/conformance/brokendriver")
	for _, m := range mutants {
		t.Run(m.fault, func(t *testing.T) {
			t.Parallel()
			code, out, stderr := judge(bin, "-fault="+m.fault, m.scenario)
			if code != 1 {
				t.Fatalf("exit status %d, want 1 (a failed scenario)\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
			}
			if !strings.Contains(out, "FAIL "+m.scenario) || !strings.Contains(out, m.rule) {
				t.Errorf("the report does not name scenario %s and the rule %q:\n%s", m.scenario, m.rule, out)
			}
			t.Logf("the kit reported:\n%s", out)
		})
	}
}

// TestBrokenDriverControl: without a fault the broken driver passes every
// scenario of the mutation table, so that each kill above is the fault's.
func TestBrokenDriverControl(t *testing.T) {
	t.Parallel()
	bin := proc.MustBinary(t, "./internal/conformance/brokendriver")
	seen := map[string]bool{}
	for _, m := range mutants {
		if seen[m.scenario] {
			continue
		}
		seen[m.scenario] = true
		t.Run(m.scenario, func(t *testing.T) {
			t.Parallel()
			if code, out, stderr := judge(bin, "-fault=none", m.scenario); code != 0 {
				t.Errorf("exit status %d, want 0\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
			}
		})
	}
}

// TestBrokenDriverStarvedPrint: a client that gives up on time but whose
// lost line comes 0.25 × lease after its decision (a starved runtime) passes
// give-up-holding, because its driver stamps the decision with mono_ns: the
// kit judges the client, not the scheduling of its process. Timed by the
// line, the loss would come at 1.05 × lease, past the window.
func TestBrokenDriverStarvedPrint(t *testing.T) {
	t.Parallel()
	bin := proc.MustBinary(t, "./internal/conformance/brokendriver")
	if code, out, stderr := judge(bin, "-fault=none -print-late=500ms", "give-up-holding"); code != 0 {
		t.Errorf("exit status %d, want 0\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
}

// judge runs the kit on the broken driver with flag and one scenario.
func judge(bin, flag, scenario string) (code int, stdout, stderr string) {
	var out, errs bytes.Buffer
	code = run([]string{"-driver", "broken=" + bin + " " + flag, "-run", "^" + scenario + "$"}, &out, &errs)
	return code, out.String(), errs.String()
}

// TestUsage: no driver is a usage error that says what to give.
func TestUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(nil, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "-driver NAME=COMMAND") {
		t.Errorf("exit %d, stderr %q: want 2 and how to name a driver", code, stderr.String())
	}
	if code := run([]string{"-driver", "go=x", "-judge", "rust"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "names no -driver") {
		t.Errorf("exit %d, stderr %q: want 2 and an unknown judge", code, stderr.String())
	}
}
