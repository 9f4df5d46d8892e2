package main

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/monolock/monolock/internal/audit"
)

// The four properties, as the report names them.
const (
	checkOverlap = "a-overlap" // no accepted writes from overlapping holders
	checkStale   = "b-stale"   // every stale write rejected
	checkTokens  = "c-tokens"  // tokens strictly increase per lock, across restarts
	checkBelief  = "d-belief"  // no client believed it held after the server released
	checkServer  = "server"    // the server process itself misbehaved (crash, bad exit)
)

// Violation is one broken promise, with the evidence.
type Violation struct {
	Check string
	Msg   string
}

func (v Violation) String() string { return v.Check + ": " + v.Msg }

// Report is the result of Check.
type Report struct {
	Violations []Violation

	Runs         int
	ServerGrants int
	Releases     map[string]int // by reason
	ClientGrants int
	// RestartTokens describes each restart: last token before, first after.
	RestartTokens []string

	Accepted, Rejected int
	StaleRejected      int // M: writes with a token below the resource's highest, rejected
	// FencingWindow counts writes made after a pause without looking at the
	// lock (Believed false) that were accepted although the server had already
	// granted the lock to the next holder: the successor had not written yet,
	// so no resource can know. Fencing promises order, which held (check a),
	// not that these are rejected.
	FencingWindow int
	// FencingWindowCases describes the first few of them.
	FencingWindowCases []string
	// InFlight counts the writes whose writer looked (Lock.Valid true)
	// before the server's next grant of the lock (up to slack) and that
	// landed after it, ahead of the successor's first write: the resource
	// was slow, not the client. Like the fencing window they are in order.
	InFlight int
	// MaxInFlight is the longest such landing after the next grant.
	MaxInFlight time.Duration

	// Belief statistics over grants whose release was not a shutdown: the
	// largest (client give-up − server release), and the smallest
	// (server expiry − client give-up) for expired holds.
	MaxExcess       time.Duration
	MaxExcessReason string
	ExpiredGrants   int
	MinExpiryMargin time.Duration
	// MinExpirySpare is the smallest (margin − 0.2 × lease) over expired holds.
	MinExpirySpare time.Duration
	// Grants released by a shutdown whose client heard of it more than the
	// slack later (its link was frozen or delayed, so ERROR 0x01 could not
	// arrive); they are bounded by the next server's start instead.
	ShutdownBeliefs   int
	MaxShutdownExcess time.Duration
	// MaxCancelLag is the longest a lock's context was cancelled after its
	// give-up deadline (ClientGrant.CancelLag): the timer's lateness on
	// this machine, which the guarded code's Lock.Valid check does not wait
	// for.
	MaxCancelLag time.Duration
}

func (r *Report) add(check, format string, args ...any) {
	r.Violations = append(r.Violations, Violation{Check: check, Msg: fmt.Sprintf(format, args...)})
}

// Count returns the violations of one check.
func (r *Report) Count(check string) int {
	n := 0
	for _, v := range r.Violations {
		if v.Check == check {
			n++
		}
	}
	return n
}

type lockToken struct {
	lock  string
	token uint64
}

// hold is one grant as the server's audit history shows it.
type hold struct {
	Lock       string
	Token      uint64
	Run        int
	GrantedAt  time.Time
	ReleasedAt time.Time
	Reason     string
	Released   bool
	Next       *hold // the next grant of the same lock, in any later run
	// Bound is when the server could first have handed the lock on: the
	// release, or for a shutdown release the next server's start (the old
	// server promotes no one while shutting down).
	Bound time.Time
}

// Check runs every checker over h. slack is the clock and scheduling allowance
// for comparing a client's timestamps with the server's (see the README part
// of main.go).
func Check(h History, slack time.Duration) Report {
	r := Report{Runs: len(h.Runs), Releases: map[string]int{}, ClientGrants: len(h.Grants)}
	holds := checkAudit(&r, h.Runs)
	checkClientGrants(&r, h.Grants, holds, slack)
	checkWrites(&r, h.Writes, holds, slack)
	checkBeliefs(&r, h.Grants, holds, slack)
	return r
}

// checkAudit replays the concatenated audit logs (check c, server side): per
// run and lock, granted and released alternate for the same token; per lock,
// tokens strictly increase over all runs; every token of a run exceeds every
// token of the runs before it. It returns the holds by lock and token.
func checkAudit(r *Report, runs []ServerRun) map[lockToken]*hold {
	byKey := map[lockToken]*hold{}
	perLock := map[string][]*hold{}
	lastToken := map[string]uint64{}
	var prevMax uint64
	for ri, run := range runs {
		if run.Exit != "" {
			r.add(checkServer, "server run %d: %s", ri+1, run.Exit)
		}
		cur := map[string]*hold{}
		var runMin, runMax uint64
		for _, e := range run.Events {
			switch e.Event {
			case audit.EventGranted:
				r.ServerGrants++
				if e.Token == 0 {
					r.add(checkTokens, "run %d: lock %q granted with token 0 at %s", ri+1, e.Lock, ts(e.Time))
				}
				if h := cur[e.Lock]; h != nil {
					r.add(checkTokens, "run %d: lock %q granted token %d at %s while token %d (granted %s) was never released",
						ri+1, e.Lock, e.Token, ts(e.Time), h.Token, ts(h.GrantedAt))
				}
				if last, ok := lastToken[e.Lock]; ok && e.Token <= last {
					r.add(checkTokens, "run %d: lock %q token %d granted at %s does not exceed the previous token %d",
						ri+1, e.Lock, e.Token, ts(e.Time), last)
				}
				lastToken[e.Lock] = max(lastToken[e.Lock], e.Token)
				h := &hold{Lock: e.Lock, Token: e.Token, Run: ri, GrantedAt: e.Time}
				if _, dup := byKey[lockToken{e.Lock, e.Token}]; !dup {
					byKey[lockToken{e.Lock, e.Token}] = h
				}
				cur[e.Lock] = h
				perLock[e.Lock] = append(perLock[e.Lock], h)
				if runMin == 0 || e.Token < runMin {
					runMin = e.Token
				}
				runMax = max(runMax, e.Token)
			case audit.EventReleased:
				h := cur[e.Lock]
				if h == nil || h.Token != e.Token {
					holder := "nobody"
					if h != nil {
						holder = fmt.Sprintf("token %d", h.Token)
					}
					r.add(checkTokens, "run %d: lock %q released token %d at %s but the holder was %s",
						ri+1, e.Lock, e.Token, ts(e.Time), holder)
					continue
				}
				h.ReleasedAt, h.Reason, h.Released = e.Time, e.Reason, true
				r.Releases[e.Reason]++
				delete(cur, e.Lock)
			}
		}
		for _, lock := range sortedKeys(cur) {
			h := cur[lock]
			r.add(checkTokens, "run %d: lock %q token %d granted at %s has no release in the run's history",
				ri+1, lock, h.Token, ts(h.GrantedAt))
		}
		if ri > 0 && runMin != 0 {
			desc := fmt.Sprintf("restart %d: last token before %d, first token after %d", ri, prevMax, runMin)
			if prevMax != 0 && runMin <= prevMax {
				r.add(checkTokens, "%s: a token after the restart does not exceed the tokens before it", desc)
			}
			r.RestartTokens = append(r.RestartTokens, desc)
		}
		prevMax = max(prevMax, runMax)
	}
	for _, list := range perLock {
		for i, h := range list {
			if i+1 < len(list) {
				h.Next = list[i+1]
			}
			h.Bound = h.ReleasedAt
			if h.Reason == reasonShutdown && h.Run+1 < len(runs) {
				h.Bound = runs[h.Run+1].StartedAt
			}
		}
	}
	return byKey
}

// checkClientGrants is check c from the clients' side: every token a client
// was granted is one the server recorded for that lock, no token went to two
// clients, and in the order the clients observed their grants the tokens
// increase (up to slack: two clients can note a hand-over in either order
// when both are within a scheduling delay of it).
func checkClientGrants(r *Report, grants []ClientGrant, holds map[lockToken]*hold, slack time.Duration) {
	seen := map[lockToken]int{}
	perLock := map[string][]ClientGrant{}
	for _, g := range grants {
		k := lockToken{g.Lock, g.Token}
		if holds[k] == nil {
			r.add(checkTokens, "client %d was granted lock %q with token %d at %s, a grant the server's history does not have",
				g.Client, g.Lock, g.Token, ts(g.GrantedAt))
		}
		if other, dup := seen[k]; dup {
			r.add(checkTokens, "lock %q token %d was granted to two client sessions (grant records %d and %d)", g.Lock, g.Token, other, g.ID)
			continue
		}
		seen[k] = g.ID
		perLock[g.Lock] = append(perLock[g.Lock], g)
	}
	for _, lock := range sortedKeys(perLock) {
		list := perLock[lock]
		slices.SortFunc(list, func(a, b ClientGrant) int { return cmp.Compare(a.Token, b.Token) })
		var latest ClientGrant
		for i, g := range list {
			if i > 0 && latest.GrantedAt.After(g.GrantedAt.Add(slack)) {
				r.add(checkTokens, "lock %q: client %d got token %d at %s, %v before client %d got the lower token %d at %s",
					lock, g.Client, g.Token, ts(g.GrantedAt), latest.GrantedAt.Sub(g.GrantedAt), latest.Client, latest.Token, ts(latest.GrantedAt))
			}
			if i == 0 || g.GrantedAt.After(latest.GrantedAt) {
				latest = g
			}
		}
	}
}

// checkWrites covers checks a and b over the resource's history.
//
// b: replaying the history, every write whose token is below the highest
// token accepted before it (or is 0) was rejected, and every other write was
// accepted. M counts the rejected ones.
//
// a: per lock, the accepted writes carry non-decreasing tokens (so the writes
// of two holders never interleave); every accepted write carries a token the
// server granted for that lock and comes after that grant; one token's writes
// all come from one client grant; and a write its holder decided to make
// while still believing it held the lock was decided (CheckedAt) before the
// server's next grant of the lock (up to slack). Such a write may land later:
// it is in flight while the resource works through the writes before it, and
// counted as InFlight. A write made after a pause without looking that lands
// after the next grant but before the successor's first write is accepted —
// no resource can know better — and counted as FencingWindow. Neither is a
// violation: the successor's first write would have refused either.
func checkWrites(r *Report, writes []Write, holds map[lockToken]*hold, slack time.Duration) {
	writes = slices.Clone(writes)
	slices.SortStableFunc(writes, func(a, b Write) int { return cmp.Compare(a.Seq, b.Seq) })
	highest := map[string]uint64{}
	lastAccepted := map[string]Write{}
	writer := map[lockToken]int{}
	for _, w := range writes {
		hi := highest[w.Lock]
		stale := w.Token == 0 || w.Token < hi
		switch {
		case stale && w.Accepted:
			r.add(checkStale, "write %d by client %d on lock %q with stale token %d was accepted at %s although token %d had been written",
				w.Seq, w.Writer, w.Lock, w.Token, ts(w.At), hi)
		case stale:
			r.StaleRejected++
		case !w.Accepted:
			r.add(checkStale, "write %d by client %d on lock %q with token %d was rejected at %s although the highest token was %d",
				w.Seq, w.Writer, w.Lock, w.Token, ts(w.At), hi)
		}
		if w.Accepted {
			r.Accepted++
			highest[w.Lock] = max(hi, w.Token)
		} else {
			r.Rejected++
			continue
		}

		if prev, ok := lastAccepted[w.Lock]; ok && w.Token < prev.Token {
			r.add(checkOverlap, "lock %q: write %d (client %d, token %d) accepted at %s after write %d (client %d, token %d) at %s",
				w.Lock, w.Seq, w.Writer, w.Token, ts(w.At), prev.Seq, prev.Writer, prev.Token, ts(prev.At))
		}
		if prev, ok := lastAccepted[w.Lock]; !ok || w.Token >= prev.Token {
			lastAccepted[w.Lock] = w
		}
		k := lockToken{w.Lock, w.Token}
		if g, ok := writer[k]; ok && g != w.Grant {
			r.add(checkOverlap, "lock %q token %d: accepted writes from two client grants (%d and %d)", w.Lock, w.Token, g, w.Grant)
		}
		writer[k] = w.Grant
		h := holds[k]
		if h == nil {
			r.add(checkOverlap, "lock %q: write %d by client %d accepted with token %d, which the server never granted for this lock",
				w.Lock, w.Seq, w.Writer, w.Token)
			continue
		}
		if w.At.Before(h.GrantedAt) {
			r.add(checkOverlap, "lock %q: write %d by client %d with token %d accepted at %s, before the server granted that token at %s",
				w.Lock, w.Seq, w.Writer, w.Token, ts(w.At), ts(h.GrantedAt))
		}
		if h.Next != nil && w.At.After(h.Next.GrantedAt) {
			switch {
			case !w.Believed:
				r.FencingWindow++
				if len(r.FencingWindowCases) < 5 {
					r.FencingWindowCases = append(r.FencingWindowCases, fmt.Sprintf(
						"lock %q: client %d's write with token %d at %s, %v after the grant of token %d (the successor's first write came later)",
						w.Lock, w.Writer, w.Token, ts(w.At), w.At.Sub(h.Next.GrantedAt), h.Next.Token))
				}
			case w.CheckedAt.After(h.Next.GrantedAt.Add(slack)):
				r.add(checkOverlap, "lock %q: client %d wrote with token %d at %s believing at %s that it held the lock, %v after the server granted token %d at %s",
					w.Lock, w.Writer, w.Token, ts(w.At), ts(w.CheckedAt), w.CheckedAt.Sub(h.Next.GrantedAt), h.Next.Token, ts(h.Next.GrantedAt))
			default:
				r.InFlight++
				r.MaxInFlight = max(r.MaxInFlight, w.At.Sub(h.Next.GrantedAt))
			}
		}
	}
}

// checkBeliefs is check d: for every grant a client was told of, the client
// gave up (its lock context was cancelled by the loss, its guarded code
// returned, or its give-up deadline passed, after which Lock.Valid is false)
// no later than slack after the server could have handed the lock on.
//
// For a hold the server ended by expiry the promise is stronger, and so is the
// check: the client stops confirming-less after 0.8 × lease counted from a
// send the server saw, the server expires the hold a full lease after the
// last frame it saw, so the client must give up at least 0.2 × lease before
// the expiry (less the slack). A client whose timeout were the whole lease
// would pass the plain check but not this one.
func checkBeliefs(r *Report, grants []ClientGrant, holds map[lockToken]*hold, slack time.Duration) {
	first := true
	for _, g := range grants {
		h := holds[lockToken{g.Lock, g.Token}]
		if h == nil || !h.Released {
			continue // reported by check c
		}
		r.MaxCancelLag = max(r.MaxCancelLag, g.CancelLag())
		gaveUp := g.GaveUpAt()
		if gaveUp.IsZero() {
			r.add(checkBelief, "client %d grant %d (lock %q token %d) has no give-up time", g.Client, g.ID, g.Lock, g.Token)
			continue
		}
		cause := "its code returned"
		if !g.LostAt.IsZero() && !g.LostAt.After(g.EndedAt) {
			cause = "loss noticed: " + g.LossCause
		}
		excess := gaveUp.Sub(h.ReleasedAt)
		if h.Reason == reasonExpired {
			margin, promised := -excess, g.Lease/5
			if r.ExpiredGrants == 0 || margin-promised < r.MinExpirySpare {
				r.MinExpirySpare = margin - promised
			}
			if r.ExpiredGrants == 0 || margin < r.MinExpiryMargin {
				r.MinExpiryMargin = margin
			}
			r.ExpiredGrants++
			if margin < promised-slack {
				r.add(checkBelief, "client %d gave up lock %q (token %d, lease %v) at %s (%s), only %v before the server's expiry at %s; 0.8 × lease promises at least 0.2 × lease = %v (slack %v)",
					g.Client, g.Lock, g.Token, g.Lease, ts(gaveUp), cause, margin, ts(h.ReleasedAt), promised, slack)
			}
		} else if gaveUp.After(h.Bound.Add(slack)) {
			what := "the server released it (" + h.Reason + ")"
			if !h.Bound.Equal(h.ReleasedAt) {
				what = "the next server started"
			}
			r.add(checkBelief, "client %d believed it held lock %q (token %d, lease %v) until %s (%s), %v after %s at %s",
				g.Client, g.Lock, g.Token, g.Lease, ts(gaveUp), cause, gaveUp.Sub(h.Bound), what, ts(h.Bound))
		}
		if h.Reason == reasonShutdown {
			if excess > slack {
				r.ShutdownBeliefs++
				r.MaxShutdownExcess = max(r.MaxShutdownExcess, excess)
			}
			continue
		}
		if first || excess > r.MaxExcess {
			r.MaxExcess, r.MaxExcessReason = excess, h.Reason
		}
		first = false
	}
}

func ts(t time.Time) string { return t.UTC().Format("15:04:05.000000") }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
