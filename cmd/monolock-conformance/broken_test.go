package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/monolock/monolock/internal/testsupport/proc"
)

// TestBrokenDriverFails shows that the kit can fail a client: a client that
// heartbeats every lease/2, and one that never gives up, each fail the
// scenario of the rule they break, through the command line as a user runs
// it, and the failure names the rule.
func TestBrokenDriverFails(t *testing.T) {
	bin := proc.MustBinary(t, "./internal/conformance/brokendriver")
	cases := []struct {
		fault, scenario, rule string
	}{
		{"slow-heartbeat", "heartbeat-fast", "rule 3 (heartbeat every lease/4)"},
		{"never-give-up", "give-up-holding", "rule 8 (give up on silence)"},
	}
	for _, tc := range cases {
		t.Run(tc.fault, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			code := run([]string{"-driver", "broken=" + bin + " -fault=" + tc.fault, "-run", "^" + tc.scenario + "$"}, &stdout, &stderr)
			out := stdout.String()
			if code != 1 {
				t.Fatalf("exit status %d, want 1 (a failed scenario)\nstdout:\n%s\nstderr:\n%s", code, out, stderr.String())
			}
			if !strings.Contains(out, "FAIL "+tc.scenario) || !strings.Contains(out, tc.rule) {
				t.Errorf("the report does not name scenario %s and the rule %q:\n%s", tc.scenario, tc.rule, out)
			}
			t.Logf("the kit reported:\n%s", out)
		})
	}
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
