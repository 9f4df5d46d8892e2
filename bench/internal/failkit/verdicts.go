package failkit

import (
	"fmt"
	"math"
	"sort"
)

// HoldKey names one hold: a client and its grant number.
type HoldKey struct{ C, Hold int }

// hold is one hold as the client process saw it, on its one clock.
type hold struct {
	key        HoldKey
	lock       string
	token      uint64
	start, end int64 // granted, and the first ended (MaxInt64: never ended)
}

func holdsOf(events []Event) []hold {
	byKey := map[HoldKey]*hold{}
	var order []HoldKey
	for _, e := range events {
		k := HoldKey{e.C, e.Hold}
		switch e.Kind {
		case "granted":
			byKey[k] = &hold{key: k, lock: e.Lock, token: e.Token, start: e.At, end: math.MaxInt64}
			order = append(order, k)
		case "ended":
			if h := byKey[k]; h != nil && h.end == math.MaxInt64 {
				h.end = e.At
			}
		}
	}
	out := make([]hold, 0, len(order))
	for _, k := range order {
		out = append(out, *byKey[k])
	}
	return out
}

// Overlap is a hold that began while another hold of the same lock had not
// ended: two holders at once.
type Overlap struct {
	Lock           string
	Earlier, Later HoldKey
}

func (o Overlap) String() string {
	return fmt.Sprintf("lock %s: client %d's hold %d began before client %d's hold %d ended", o.Lock, o.Later.C, o.Later.Hold, o.Earlier.C, o.Earlier.Hold)
}

// Overlaps lists the holds that began, by the client process's clock,
// before an earlier hold of the same lock had ended (was released or
// declared lost, at the latest at its ValidUntil). A hold that never ended
// overlaps every later one; one that ended before it began (granted after
// its lease had run out) overlaps none.
func Overlaps(events []Event) []Overlap {
	byLock := map[string][]hold{}
	for _, h := range holdsOf(events) {
		if h.end < h.start {
			continue // never valid: its holder could not act on it
		}
		byLock[h.lock] = append(byLock[h.lock], h)
	}
	var out []Overlap
	for lock, hs := range byLock {
		sort.SliceStable(hs, func(i, j int) bool { return hs[i].start < hs[j].start })
		var open *hold // the hold with the latest end so far
		for i := range hs {
			if open != nil && hs[i].start < open.end {
				out = append(out, Overlap{Lock: lock, Earlier: open.key, Later: hs[i].key})
			}
			if open == nil || hs[i].end > open.end {
				open = &hs[i]
			}
		}
	}
	return out
}

// StaleLanded counts the writes the fenced resource accepted although, in
// its own order of decisions on the lock, it had already admitted a write
// of another hold with a token as large or larger: a stale write that
// landed. The fence rule (a token at least the largest admitted) refuses a
// smaller token, so what can land is a second hold with the same token (a
// token granted twice) or, with a broken fence, a smaller one. A write of
// an old holder that arrives before the new holder's first write lands
// under any fence and is not counted: fencing cannot know of a holder that
// has not written yet (the overlap of the holds is what Overlaps checks).
func StaleLanded(events []Event) int {
	var writes []Event
	for _, e := range events {
		if e.Kind == "write" && e.OK {
			writes = append(writes, e)
		}
	}
	sort.SliceStable(writes, func(i, j int) bool { return writes[i].At < writes[j].At })
	type top struct {
		token uint64
		holds map[HoldKey]bool
	}
	highest := map[string]*top{}
	n := 0
	for _, w := range writes {
		k := HoldKey{w.C, w.Hold}
		t := highest[w.Lock]
		switch {
		case t == nil || w.Token > t.token:
			highest[w.Lock] = &top{token: w.Token, holds: map[HoldKey]bool{k: true}}
		case w.Token < t.token || !t.holds[k]:
			n++
		}
	}
	return n
}

// StaleRejected counts the writes the fenced resource refused.
func StaleRejected(events []Event) int {
	n := 0
	for _, e := range events {
		if e.Kind == "write" && !e.OK {
			n++
		}
	}
	return n
}

// Increasing returns an error naming the first grant whose token is not
// above the one before it, in the order given (one server's audit log).
func Increasing(grants []Grant) error {
	for i := 1; i < len(grants); i++ {
		if grants[i].Token <= grants[i-1].Token {
			return fmt.Errorf("grant %d (lock %s at %s) has token %d, not above the one before it (%d)", i, grants[i].Lock,
				grants[i].At.Format("15:04:05.000"), grants[i].Token, grants[i-1].Token)
		}
	}
	return nil
}
