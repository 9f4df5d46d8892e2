package conformance

import (
	"strings"
	"testing"
)

// A failure counts only once a scenario's attempts are used up: a client
// that breaks the rule fails every run, one starved by a loaded machine
// passes the next, and the report says so.
func TestRunAttempts(t *testing.T) {
	runs := 0
	failFirst := Scenario{Name: "starved-once", Rule: "rule 3", Attempts: 3, run: func(e *Env) {
		runs++
		if runs == 1 {
			e.Failf("rule 3", "late")
		}
	}}
	res := Run(failFirst, Config{})
	if res.Err != nil || runs != 2 || len(res.Retried) != 1 || !strings.Contains(res.String(), "PASS starved-once (run 2 of at most 3; the earlier failed: ") {
		t.Errorf("after one failure: %d runs, result %q", runs, res)
	}

	runs = 0
	always := Scenario{Name: "broken", Rule: "rule 3", Attempts: 3, run: func(e *Env) { runs++; e.Failf("rule 3", "late") }}
	if res := Run(always, Config{}); res.Err == nil || runs != 3 || !strings.HasPrefix(res.String(), "FAIL broken") {
		t.Errorf("a scenario that always fails: %d runs, result %q", runs, res)
	}

	runs = 0
	once := Scenario{Name: "once", Rule: "rule 3", run: func(e *Env) { runs++; e.Failf("rule 3", "late") }}
	if res := Run(once, Config{}); res.Err == nil || runs != 1 {
		t.Errorf("a scenario without attempts: %d runs, result %q", runs, res)
	}
}

// A scenario that needs an optional part of the driver contract is skipped
// as not supported for a driver not listed with it, never failed, and runs
// for one that is.
func TestRunSkipsWhatTheDriverDoesNotSupport(t *testing.T) {
	runs := 0
	sc := Scenario{Name: "needs-addresses", Rule: "several addresses", Needs: FeatureAddresses, run: func(e *Env) { runs++ }}
	res := Run(sc, Config{Judge: Driver{Name: "old"}})
	if res.Err != nil || runs != 0 || !strings.HasPrefix(res.String(), `SKIP needs-addresses: not supported: driver old does not announce "addresses"`) {
		t.Errorf("a driver without the feature: %d runs, result %q", runs, res)
	}
	if res := Run(sc, Config{Judge: Driver{Name: "new", Supports: []string{FeatureAddresses}}}); res.Err != nil || res.Skipped != "" || runs != 1 {
		t.Errorf("a driver with the feature: %d runs, result %q", runs, res)
	}
}
