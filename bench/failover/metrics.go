package main

import (
	"fmt"
	"time"

	"github.com/monolock/monolock/bench/internal/failkit"
)

// observation is what the harness saw of one round.
type observation struct {
	fault string
	lease time.Duration
	slack time.Duration
	// fault is when the fault was injected; confirmEnd is when the old
	// primary could confirm leases no more: the fault itself, or for a
	// clean SIGTERM the moment its address left (its sessions were served
	// during the shutdown delay until then).
	faultAt, confirmEnd  time.Time
	vipArrived           time.Time // the standby held the address (zero: never)
	fencedAt             time.Time // the old primary's notify script killed it (zero: never)
	oldAlive             bool      // the old primary's monolock still ran at the end
	clients              int
	events               []failkit.Event
	oldGrants, newGrants []failkit.Grant
}

// row is one line of the results table.
type row struct {
	Fault           string
	D               time.Duration // fault to the standby's first grant
	Readmit         time.Duration // fault to every client holding or queued again (but those in a long pause at the fault)
	LateHolders     int           // holders still holding after confirmEnd + 0.8 × lease (+ slack)
	TokenOrder      bool          // the standby's first token is above every token of the old primary
	StaleRejected   int
	DoubleGrants    int
	Fenced          bool
	FencedAfter     time.Duration
	NotReadmitted   int // clients that never held or queued again
	StandbyFirst    uint64
	OldMax          uint64
	violationReason []string
}

// measure turns an observation into a row and lists the violations.
func measure(o observation) row {
	r := row{Fault: o.fault, Fenced: !o.fencedAt.IsZero() && !o.oldAlive}
	if r.Fenced {
		r.FencedAfter = o.fencedAt.Sub(o.faultAt)
	}
	var first *failkit.Grant
	for i := range o.newGrants {
		g := &o.newGrants[i]
		if g.At.Before(o.faultAt) {
			continue
		}
		if first == nil || g.At.Before(first.At) {
			first = g
		}
	}
	standby := map[uint64]bool{}
	for _, g := range o.newGrants {
		standby[g.Token] = true
	}
	for _, g := range o.oldGrants {
		r.OldMax = max(r.OldMax, g.Token)
	}
	if first != nil {
		r.D = first.At.Sub(o.faultAt)
		r.StandbyFirst = first.Token
	}

	readmitted := map[int]time.Time{}
	pausedAtFault := map[int]bool{} // in a long pause when the fault came: their return says nothing of the pair
	type holdKey struct{ c, h int }
	granted := map[holdKey]failkit.Event{}
	ended := map[holdKey]time.Time{}
	type lockToken struct {
		lock string
		tok  uint64
	}
	writers := map[lockToken]map[holdKey]bool{}
	for _, e := range o.events {
		at := time.Unix(0, e.At)
		k := holdKey{e.C, e.Hold}
		switch e.Kind {
		case "answered":
			if !o.vipArrived.IsZero() && !at.Before(o.vipArrived) {
				if _, ok := readmitted[e.C]; !ok {
					readmitted[e.C] = at
				}
			}
		case "paused":
			if !at.After(o.faultAt) && time.Unix(0, e.Until).After(o.faultAt) {
				pausedAtFault[e.C] = true
			}
		case "granted":
			granted[k] = e
			if !standby[e.Token] {
				r.OldMax = max(r.OldMax, e.Token)
			}
		case "ended":
			if _, ok := ended[k]; !ok {
				ended[k] = at
			}
		case "write":
			if !e.OK {
				r.StaleRejected++
				continue
			}
			lt := lockToken{e.Lock, e.Token}
			if writers[lt] == nil {
				writers[lt] = map[holdKey]bool{}
			}
			writers[lt][k] = true
		}
	}
	for _, w := range writers {
		if len(w) > 1 {
			r.DoubleGrants += len(w) - 1
		}
	}
	bound := o.confirmEnd.Add(o.lease * 8 / 10).Add(o.slack)
	for k, g := range granted {
		if standby[g.Token] || !time.Unix(0, g.At).Before(o.confirmEnd) {
			continue // not a hold of the old primary
		}
		end, ok := ended[k]
		if !ok || end.After(bound) {
			r.LateHolders++
		}
	}
	var last time.Time
	for c := range o.clients {
		at, ok := readmitted[c]
		if !ok {
			r.NotReadmitted++
			continue
		}
		if at.After(last) && !pausedAtFault[c] {
			last = at
		}
	}
	if !last.IsZero() {
		r.Readmit = last.Sub(o.faultAt)
	}
	r.TokenOrder = first != nil && first.Token > r.OldMax

	add := func(format string, args ...any) {
		r.violationReason = append(r.violationReason, fmt.Sprintf(format, args...))
	}
	switch {
	case first == nil:
		add("the standby granted nothing after the fault")
	case !r.TokenOrder:
		add("the standby's first token %d is not above the old primary's %d", first.Token, r.OldMax)
	}
	if r.LateHolders > 0 {
		add("%d holders of the old primary still held after 0.8 × lease", r.LateHolders)
	}
	if r.DoubleGrants > 0 {
		add("%d double grants seen by the resource", r.DoubleGrants)
	}
	if !r.Fenced {
		add("the old primary was not fenced (fence call: %v, still running: %v)", !o.fencedAt.IsZero(), o.oldAlive)
	}
	if r.NotReadmitted > 0 {
		add("%d clients never held or queued again", r.NotReadmitted)
	}
	return r
}
