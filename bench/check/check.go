// Package check is the harness's correctness judge: it sees every grant and
// release of a run and records two holders of one lock or a token going
// backwards.
package check

import (
	"fmt"
	"sync"
	"time"
)

// Checker watches every grant the harness sees and records a violation when
// two holders of one lock would exist at once, or when a lock's fencing token
// does not increase. It is safe for concurrent use.
//
// A holder believes it holds from its grant until it starts to release (it
// marks the release before closing or unlocking, so the next grant can only
// come after the mark), or, for a holder that stopped heartbeating, until the
// time set with Lapse: the earliest moment the server may hand the lock on.
// A grant to another worker while a belief stands is a violation.
type Checker struct {
	mu         sync.Mutex
	locks      map[string]*lockView
	violations []string
	failures   int
	grants     uint64
}

type lockView struct {
	holder     int   // worker id; -1 when free
	validUntil int64 // 0: until released; otherwise a monotonic deadline (ns)
	lastToken  uint64
	tokens     bool // lastToken is set
}

// maxViolations bounds what is kept; the count of grants goes on.
const maxViolations = 20

// New returns an empty checker.
func New() *Checker { return &Checker{locks: make(map[string]*lockView)} }

func (c *Checker) view(lock string) *lockView {
	v := c.locks[lock]
	if v == nil {
		v = &lockView{holder: -1}
		c.locks[lock] = v
	}
	return v
}

func (c *Checker) violate(format string, args ...any) {
	c.failures++
	if len(c.violations) < maxViolations {
		c.violations = append(c.violations, fmt.Sprintf(format, args...))
	} else if len(c.violations) == maxViolations {
		c.violations = append(c.violations, "… further violations not kept")
	}
}

// Grant records that worker was granted lock at time now (monotonic ns). When
// hasToken is set, token must exceed every token seen earlier for the lock.
// It reports whether the grant was consistent.
func (c *Checker) Grant(lock string, worker int, now int64, token uint64, hasToken bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.grants++
	v := c.view(lock)
	ok := true
	if v.holder >= 0 && v.holder != worker && (v.validUntil == 0 || now < v.validUntil) {
		if v.validUntil == 0 {
			c.violate("two holders of %q: worker %d granted while worker %d still holds", lock, worker, v.holder)
		} else {
			c.violate("two holders of %q: worker %d granted %v before worker %d's lease could end", lock, worker, time.Duration(v.validUntil-now), v.holder)
		}
		ok = false
	}
	if v.holder == worker && v.validUntil == 0 {
		c.violate("worker %d granted %q twice without releasing", worker, lock)
		ok = false
	}
	if hasToken {
		if v.tokens && token <= v.lastToken {
			c.violate("token of %q went backwards or repeated: %d after %d", lock, token, v.lastToken)
			ok = false
		}
		v.lastToken, v.tokens = token, true
	}
	v.holder, v.validUntil = worker, 0
	return ok
}

// Release records that worker gave lock up. Call it before the release
// reaches the server.
func (c *Checker) Release(lock string, worker int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.view(lock)
	if v.holder == worker {
		v.holder, v.validUntil = -1, 0
	}
}

// Lapse records that worker went silent: the server may hand lock on from
// until (monotonic ns) on, and not before.
func (c *Checker) Lapse(lock string, worker int, until int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.view(lock)
	if v.holder == worker {
		v.validUntil = until
	}
}

// Report records a violation found by a workload's own check.
func (c *Checker) Report(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.violate(format, args...)
}

// Violations returns what went wrong so far.
func (c *Checker) Violations() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.violations...)
}

// Failures is the number of violations, including those not kept.
func (c *Checker) Failures() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failures
}

// Grants is the number of grants checked.
func (c *Checker) Grants() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.grants
}
