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
// declared lost). A hold that never ended overlaps every later one.
func Overlaps(events []Event) []Overlap {
	byLock := map[string][]hold{}
	for _, h := range holdsOf(events) {
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

// StaleLanded counts the writes the fenced resource accepted although a
// hold of the same lock with a larger token had been granted before the
// write was decided: a stale write that landed.
func StaleLanded(events []Event) int {
	type grantAt struct {
		at    int64
		token uint64
	}
	grants := map[string][]grantAt{}
	for _, h := range holdsOf(events) {
		grants[h.lock] = append(grants[h.lock], grantAt{h.start, h.token})
	}
	for _, gs := range grants {
		sort.Slice(gs, func(i, j int) bool { return gs[i].at < gs[j].at })
		for i := 1; i < len(gs); i++ { // prefix maximum of the tokens
			gs[i].token = max(gs[i].token, gs[i-1].token)
		}
	}
	n := 0
	for _, e := range events {
		if e.Kind != "write" || !e.OK {
			continue
		}
		gs := grants[e.Lock]
		i := sort.Search(len(gs), func(i int) bool { return gs[i].at >= e.At }) // grants strictly before the write
		if i > 0 && gs[i-1].token > e.Token {
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
