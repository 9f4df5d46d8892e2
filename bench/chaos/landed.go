package main

import (
	"context"
	"fmt"
	"io"
	"sort"
)

// checkLanded reads the database's write log and reports, per lock, the
// stale attempts (from the resource's record: a token below one it had
// admitted) and the stale writes that landed (from the rows, in commit
// order). A landed stale write is a violation of check (b).
func (h *harness) checkLanded(rep *Report, out io.Writer) error {
	landed, err := h.store.Landed(context.Background())
	if err != nil {
		return err
	}
	attempts := map[string]int{}
	for _, w := range h.res.Writes() {
		if w.Token < w.Highest {
			attempts[w.Lock]++
		}
	}
	locks := make([]string, 0, len(landed))
	for l := range landed {
		locks = append(locks, l)
	}
	sort.Strings(locks)
	fmt.Fprintf(out, "  database (%s): | lock | writes landed | stale attempts | stale writes landed |\n", h.cfg.store)
	total, stale, tried := 0, 0, 0
	for _, l := range locks {
		fmt.Fprintf(out, "    | %s | %d | %d | %d |\n", l, landed[l].Writes, attempts[l], landed[l].Stale)
		total += landed[l].Writes
		stale += landed[l].Stale
		tried += attempts[l]
		if landed[l].Stale > 0 {
			rep.Violations = append(rep.Violations, Violation{Check: checkStale,
				Msg: fmt.Sprintf("lock %s: %d stale write(s) landed in the database", l, landed[l].Stale)})
		}
	}
	fmt.Fprintf(out, "  database (%s): %d writes landed, %d stale attempts, %d stale writes landed\n", h.cfg.store, total, tried, stale)
	return nil
}
