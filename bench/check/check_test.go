package check

import (
	"strings"
	"sync"
	"testing"
)

func TestCheckerCleanHandovers(t *testing.T) {
	c := New()
	tok := uint64(10)
	for i := range 100 {
		w := i % 3
		tok++
		if !c.Grant("L", w, int64(i), tok, true) {
			t.Fatalf("grant %d flagged: %v", i, c.Violations())
		}
		c.Release("L", w)
	}
	if c.Failures() != 0 || c.Grants() != 100 {
		t.Fatalf("failures %d grants %d", c.Failures(), c.Grants())
	}
}

func TestCheckerTwoHolders(t *testing.T) {
	c := New()
	c.Grant("L", 1, 0, 1, true)
	if c.Grant("L", 2, 5, 2, true) {
		t.Fatal("a grant while another worker holds must be flagged")
	}
	v := c.Violations()
	if len(v) != 1 || !strings.Contains(v[0], "two holders") {
		t.Fatalf("violations %q", v)
	}
}

func TestCheckerTokenBackwards(t *testing.T) {
	c := New()
	c.Grant("L", 1, 0, 7, true)
	c.Release("L", 1)
	if c.Grant("L", 2, 1, 7, true) {
		t.Fatal("a repeated token must be flagged")
	}
	c.Release("L", 2)
	if c.Grant("L", 3, 2, 6, true) {
		t.Fatal("a smaller token must be flagged")
	}
	c.Release("L", 3)
	// Tokens are per lock: another lock may start lower.
	if !c.Grant("M", 1, 3, 1, true) {
		t.Fatalf("a first token on another lock is fine: %v", c.Violations())
	}
	// No token (Redis, PostgreSQL): nothing to compare.
	c.Release("M", 1)
	if !c.Grant("M", 2, 4, 0, false) {
		t.Fatal("a grant without a token must not be compared")
	}
	if c.Failures() != 2 {
		t.Fatalf("failures %d, want 2: %v", c.Failures(), c.Violations())
	}
}

func TestCheckerLapse(t *testing.T) {
	c := New()
	c.Grant("L", 1, 0, 1, true)
	c.Lapse("L", 1, 1000) // silent: the lease may end at t=1000
	if c.Grant("L", 2, 999, 2, true) {
		t.Fatal("a grant before the silent holder's lease ended must be flagged")
	}
	c2 := New()
	c2.Grant("L", 1, 0, 1, true)
	c2.Lapse("L", 1, 1000)
	if !c2.Grant("L", 2, 1000, 2, true) {
		t.Fatalf("a grant once the lease ended is fine: %v", c2.Violations())
	}
	// Lapse by a worker that does not hold changes nothing.
	c2.Lapse("L", 1, 5000)
	if c2.Grant("L", 3, 2000, 3, true) {
		t.Fatal("worker 2 still holds: a grant to worker 3 must be flagged")
	}
}

func TestCheckerDoubleGrantSameWorker(t *testing.T) {
	c := New()
	c.Grant("L", 1, 0, 1, true)
	if c.Grant("L", 1, 1, 2, true) {
		t.Fatal("a second grant to a worker that never released must be flagged")
	}
}

func TestCheckerKeepsFewViolations(t *testing.T) {
	c := New()
	for i := range 100 {
		c.Grant("L", i, int64(i), 1, true)
	}
	if c.Failures() < 99 {
		t.Fatalf("failures %d", c.Failures())
	}
	if n := len(c.Violations()); n != maxViolations+1 {
		t.Fatalf("kept %d violations, want %d", n, maxViolations+1)
	}
	c.Report("custom %d", 7)
	if c.Failures() < 100 {
		t.Fatal("Report must count")
	}
}

func TestCheckerConcurrent(t *testing.T) {
	// Workers hand one lock around under a mutex, as a correct server would:
	// the checker must see no violation (and the race detector no race).
	c := New()
	var mu sync.Mutex
	var tok uint64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for range 200 {
				mu.Lock()
				tok++
				c.Grant("L", w, int64(tok), tok, true)
				c.Release("L", w)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if c.Failures() != 0 || c.Grants() != 1600 {
		t.Fatalf("failures %d grants %d: %v", c.Failures(), c.Grants(), c.Violations())
	}
}
