package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/monolock/monolock/internal/audit"
	"github.com/monolock/monolock/internal/auditcheck"
)

const testSlack = 10 * time.Millisecond

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

const (
	r1 = uint64(100) << 32 // tokens of server run 1
	r2 = uint64(105) << 32 // tokens of server run 2, started more than a second later
)

// cleanHistory is a small history without violations: two server runs, two
// locks, a lease that expires under a paused holder (whose late write is
// rejected), a shutdown the holder of M hears of only later (frozen link)
// but before the next server starts.
func cleanHistory() History {
	granted := func(at int, lock string, tok uint64) auditcheck.Event {
		return auditcheck.Event{Time: ms(at), Event: audit.EventGranted, Lock: lock, Token: tok}
	}
	released := func(at int, lock string, tok uint64, reason string) auditcheck.Event {
		return auditcheck.Event{Time: ms(at), Event: audit.EventReleased, Lock: lock, Token: tok, Reason: reason}
	}
	h := History{
		Runs: []ServerRun{
			{StartedAt: ms(-100), StoppedAt: ms(990), ExitedAt: ms(1010), Events: []auditcheck.Event{
				granted(0, "L", r1),
				granted(50, "M", r1+1), // tokens are one sequence over all locks
				released(100, "L", r1, "graceful"),
				granted(100, "L", r1+2),
				released(400, "L", r1+2, "expired"),
				granted(400, "L", r1+3),
				released(1000, "M", r1+1, reasonShutdown),
				released(1000, "L", r1+3, reasonShutdown),
			}},
			{StartedAt: ms(3500), StoppedAt: ms(4000), ExitedAt: ms(4010), Events: []auditcheck.Event{
				granted(3600, "L", r2),
				granted(3650, "M", r2+1),
				released(3700, "L", r2, "graceful"),
				released(3800, "M", r2+1, "graceful"),
			}},
		},
		Grants: []ClientGrant{
			{ID: 1, Client: 1, Lock: "L", Token: r1, GrantedAt: ms(2), EndedAt: ms(90)},
			{ID: 2, Client: 2, Lock: "L", Token: r1 + 2, Lease: 250 * time.Millisecond, GrantedAt: ms(102), LostAt: ms(300), LossCause: "heartbeat timeout", EndedAt: ms(500)},
			{ID: 3, Client: 3, Lock: "M", Token: r1 + 1, GrantedAt: ms(52), LostAt: ms(2500), LossCause: "heartbeat timeout", EndedAt: ms(2500)},
			{ID: 4, Client: 4, Lock: "L", Token: r1 + 3, GrantedAt: ms(402), LostAt: ms(1001), LossCause: "server error", EndedAt: ms(1001)},
			{ID: 5, Client: 5, Lock: "L", Token: r2, GrantedAt: ms(3602), EndedAt: ms(3690)},
			{ID: 6, Client: 6, Lock: "M", Token: r2 + 1, GrantedAt: ms(3652), EndedAt: ms(3790)},
		},
		Writes: []Write{
			{Lock: "L", Token: r1, Writer: 1, Grant: 1, At: ms(5), Accepted: true, Believed: true},
			{Lock: "M", Token: r1 + 1, Writer: 3, Grant: 3, At: ms(55), Accepted: true, Believed: true},
			{Lock: "L", Token: r1, Writer: 1, Grant: 1, At: ms(60), Accepted: true, Believed: true},
			{Lock: "L", Token: r1 + 2, Writer: 2, Grant: 2, At: ms(105), Accepted: true, Believed: true},
			{Lock: "L", Token: r1 + 2, Writer: 2, Grant: 2, At: ms(200), Accepted: true, Believed: true},
			{Lock: "L", Token: r1 + 3, Writer: 4, Grant: 4, At: ms(405), Accepted: true, Believed: true},
			// Client 2 after its pause: lost at 300, expired at 400, writes at 500.
			{Lock: "L", Token: r1 + 2, Writer: 2, Grant: 2, At: ms(500), Accepted: false, Believed: false},
			{Lock: "L", Token: r2, Writer: 5, Grant: 5, At: ms(3605), Accepted: true, Believed: true},
			{Lock: "M", Token: r2 + 1, Writer: 6, Grant: 6, At: ms(3655), Accepted: true, Believed: true},
		},
	}
	for i := range h.Writes {
		h.Writes[i].CheckedAt = h.Writes[i].At // each writer looked just before its write landed
	}
	renumber(&h)
	return h
}

func renumber(h *History) {
	for i := range h.Writes {
		h.Writes[i].Seq = i
	}
}

func TestCheckCleanHistory(t *testing.T) {
	r := Check(cleanHistory(), testSlack)
	if len(r.Violations) != 0 {
		t.Fatalf("violations in the clean history: %v", r.Violations)
	}
	if r.ServerGrants != 6 || r.ClientGrants != 6 || r.StaleRejected != 1 || r.Accepted != 8 || r.Rejected != 1 {
		t.Fatalf("counts: %+v", r)
	}
	if r.FencingWindow != 0 || r.ShutdownBeliefs != 1 || r.MaxShutdownExcess != 1500*time.Millisecond {
		t.Fatalf("fencing window %d, shutdown beliefs %d (max %v); want 0, 1 (1.5s)", r.FencingWindow, r.ShutdownBeliefs, r.MaxShutdownExcess)
	}
	if r.ExpiredGrants != 1 || r.MinExpiryMargin != 100*time.Millisecond || r.MinExpirySpare != 50*time.Millisecond {
		t.Fatalf("expired %d, margin %v, spare %v; want 1, 100ms, 50ms", r.ExpiredGrants, r.MinExpiryMargin, r.MinExpirySpare)
	}
	if r.MaxExcess != -10*time.Millisecond || r.MaxExcessReason != "graceful" {
		t.Fatalf("max excess %v (%s), want -10ms (graceful)", r.MaxExcess, r.MaxExcessReason)
	}
	if len(r.RestartTokens) != 1 || r.Releases[reasonShutdown] != 2 {
		t.Fatalf("restart tokens %v, releases %v", r.RestartTokens, r.Releases)
	}
}

// Every checker must catch its violation: each case breaks the clean history
// in one way and names the check and a piece of the message it expects.
func TestCheckCatchesViolations(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(h *History)
		check  string
		want   string // in one of that check's messages
		others bool   // other checks may fire too
	}{
		// (a) overlap
		{"write before its grant", func(h *History) { h.Writes[3].At = ms(99) },
			checkOverlap, "before the server granted", false},
		{"believed write after the next grant", func(h *History) {
			h.Writes = slices.Delete(h.Writes, 5, 6) // client 4 never writes
			h.Writes[5].At, h.Writes[5].Accepted, h.Writes[5].Believed = ms(420), true, true
			h.Writes[5].CheckedAt = ms(415) // the client looked after the next grant and thought it held
		}, checkOverlap, "that it held the lock, 15ms after the server granted", false},
		{"write with a token never granted", func(h *History) {
			h.Writes = append(h.Writes, Write{Lock: "L", Token: r2 + 7, Writer: 9, Grant: 9, At: ms(3900), Accepted: true, Believed: true})
		}, checkOverlap, "never granted", false},
		{"one token, two writers", func(h *History) {
			h.Writes = append(h.Writes, Write{Lock: "L", Token: r2, Writer: 9, Grant: 99, At: ms(3690), Accepted: true, Believed: true})
		}, checkOverlap, "two client grants", false},
		{"accepted writes out of token order", func(h *History) { h.Writes[6].Accepted = true },
			checkOverlap, "accepted at", true},
		// (b) stale
		{"stale write accepted", func(h *History) { h.Writes[6].Accepted = true },
			checkStale, "stale token", true},
		{"fresh write rejected", func(h *History) { h.Writes[4].Accepted = false },
			checkStale, "was rejected", false},
		// (c) tokens
		{"token not increasing on a lock", func(h *History) {
			h.Runs[0].Events[3].Token, h.Runs[0].Events[4].Token = r1-5, r1-5
			h.Grants[1].Token = r1 - 5
			for i := range h.Writes {
				if h.Writes[i].Grant == 2 {
					h.Writes[i].Token = r1 - 5
				}
			}
			h.Writes[3].Accepted, h.Writes[4].Accepted = false, false
		}, checkTokens, "does not exceed the previous token", true},
		{"restart reissues old tokens", func(h *History) {
			for i := range h.Runs[1].Events {
				h.Runs[1].Events[i].Token -= r2 - r1 - 10 // r1+10, r1+11: still above L's and M's last
			}
			h.Grants[4].Token, h.Grants[5].Token = r1+10, r1+11
			h.Writes[7].Token, h.Writes[8].Token = r1+10, r1+11
			h.Runs[0].Events = append(h.Runs[0].Events, auditcheck.Event{Time: ms(900), Event: audit.EventGranted, Lock: "N", Token: r1 + 20},
				auditcheck.Event{Time: ms(950), Event: audit.EventReleased, Lock: "N", Token: r1 + 20, Reason: "graceful"})
		}, checkTokens, "does not exceed the tokens before it", false},
		{"grant while held", func(h *History) { h.Runs[0].Events = slices.Delete(h.Runs[0].Events, 2, 3) },
			checkTokens, "was never released", true},
		{"release by a non-holder", func(h *History) { h.Runs[0].Events[2].Token = r1 + 9 },
			checkTokens, "but the holder was", true},
		{"grant without release", func(h *History) { h.Runs[1].Events = h.Runs[1].Events[:3] },
			checkTokens, "has no release", false},
		{"client token unknown to the server", func(h *History) { h.Grants[0].Token = r1 + 77 },
			checkTokens, "does not have", false},
		{"one token granted to two clients", func(h *History) {
			h.Grants = append(h.Grants, ClientGrant{ID: 7, Client: 7, Lock: "L", Token: r2, GrantedAt: ms(3603), EndedAt: ms(3604)})
		}, checkTokens, "two client sessions", false},
		{"clients observe tokens out of order", func(h *History) { h.Grants[4].GrantedAt, h.Grants[4].EndedAt = ms(350), ms(360) },
			checkTokens, "lower token", true},
		// (d) belief
		{"client gives up after the release", func(h *History) { h.Grants[0].EndedAt = ms(150) },
			checkBelief, "after the server released it (graceful)", false},
		{"client outlives an expiry", func(h *History) { h.Grants[1].LostAt = ms(420) },
			checkBelief, "only -20ms before the server's expiry", false},
		{"client timeout of a whole lease", func(h *History) { h.Grants[1].LostAt = ms(365) }, // 35ms < 0.2 × 250ms − 10ms
			checkBelief, "only 35ms before the server's expiry", false},
		{"client deadline of a whole lease", func(h *History) { h.Grants[1].ValidUntil, h.Grants[1].LostAt = ms(365), ms(380) },
			checkBelief, "only 35ms before the server's expiry", false},
		{"client outlives a shutdown past the next start", func(h *History) {
			h.Grants[2].LostAt, h.Grants[2].EndedAt = ms(3600), ms(3600)
		}, checkBelief, "the next server started", false},
		{"no give-up time", func(h *History) { h.Grants[5].EndedAt = time.Time{} },
			checkBelief, "no give-up time", false},
		// the server process
		{"bad exit", func(h *History) { h.Runs[0].Exit = "exit status 1" },
			checkServer, "exit status 1", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := cleanHistory()
			c.mutate(&h)
			renumber(&h)
			r := Check(h, testSlack)
			found := false
			for _, v := range r.Violations {
				if v.Check == c.check && strings.Contains(v.Msg, c.want) {
					found = true
				}
				if v.Check != c.check && !c.others {
					t.Errorf("unexpected violation of another check: %v", v)
				}
			}
			if !found {
				t.Fatalf("no %s violation mentioning %q; got %v", c.check, c.want, r.Violations)
			}
		})
	}
}

// Inside the slack and inside the fencing window are not violations.
func TestCheckTolerances(t *testing.T) {
	h := cleanHistory()
	h.Grants[0].EndedAt = ms(105) // 5ms after the release: scheduling
	h.Grants[1].LostAt = ms(359)  // 41ms before the expiry: 0.2 × lease − 9ms
	r := Check(h, testSlack)
	if len(r.Violations) != 0 || r.MaxExcess != 5*time.Millisecond || r.MinExpirySpare != -9*time.Millisecond {
		t.Fatalf("give-up within the slack: %v, max excess %v, spare %v", r.Violations, r.MaxExcess, r.MinExpirySpare)
	}

	h = cleanHistory()
	h.Writes = slices.Delete(h.Writes, 5, 6) // the successor has not written yet…
	h.Writes[5].At, h.Writes[5].Accepted = ms(420), true
	renumber(&h) // …when the paused holder writes without looking
	r = Check(h, testSlack)
	if len(r.Violations) != 0 || r.FencingWindow != 1 || r.StaleRejected != 0 {
		t.Fatalf("fencing window: %v, window %d, stale %d", r.Violations, r.FencingWindow, r.StaleRejected)
	}

	// A write decided before the next grant that lands 400 ms after it,
	// ahead of the successor's first write: it queued in a slow resource.
	h = cleanHistory()
	h.Writes = slices.Delete(h.Writes, 5, 6) // client 4 writes no more…
	h.Writes[5].At, h.Writes[5].Accepted, h.Writes[5].Believed = ms(800), true, true
	h.Writes[5].CheckedAt = ms(395) // …and client 2 looked before the grant at 400
	renumber(&h)
	r = Check(h, testSlack)
	if len(r.Violations) != 0 || r.InFlight != 1 || r.MaxInFlight != 400*time.Millisecond || r.FencingWindow != 0 {
		t.Fatalf("in flight: %v, in flight %d (at most %v), window %d", r.Violations, r.InFlight, r.MaxInFlight, r.FencingWindow)
	}

	// A heartbeat timeout whose context was cancelled 120 ms late, after the
	// server's expiry, by a timer a loaded machine ran late: the deadline,
	// after which Lock.Valid is false, kept 0.2 × lease.
	h = cleanHistory()
	h.Grants[1].ValidUntil, h.Grants[1].LostAt = ms(350), ms(470)
	r = Check(h, testSlack)
	if len(r.Violations) != 0 || r.MinExpiryMargin != 50*time.Millisecond || r.MaxCancelLag != 120*time.Millisecond {
		t.Fatalf("late cancellation: %v, margin %v, cancel lag %v", r.Violations, r.MinExpiryMargin, r.MaxCancelLag)
	}

	h = cleanHistory()
	h.Grants[4].GrantedAt = ms(3601)
	h.Grants = append(h.Grants, ClientGrant{ID: 7, Client: 7, Lock: "L", Token: r1 + 3, GrantedAt: ms(3605), EndedAt: ms(3606)})
	h.Grants = slices.Delete(h.Grants, 3, 4) // client 7 noted token r1+3 late, within the slack
	r = Check(h, testSlack)
	for _, v := range r.Violations {
		if v.Check == checkTokens {
			t.Fatalf("order within the slack flagged: %v", v)
		}
	}
}

// ParseAudit is auditcheck.Read (tested there) that refuses a bad line: the
// harness reads its servers' logs after a clean exit.
func TestParseAuditRefusesABadLine(t *testing.T) {
	good := `{"time":"2026-11-30T07:21:13.797454167Z","event":"granted","lock":"chaos-3","remote_addr":"127.0.0.1:55772","token":7713861220389879808}` + "\n"
	events, err := ParseAudit(strings.NewReader(good + "\n"))
	if err != nil || len(events) != 1 || events[0].Token != 7713861220389879808 || events[0].Event != audit.EventGranted {
		t.Fatalf("ParseAudit = %+v, %v; want the one grant", events, err)
	}
	if _, err := ParseAudit(strings.NewReader(good + "not json\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("a bad line: err = %v, want one naming line 2", err)
	}
}

func TestGaveUpAt(t *testing.T) {
	var zero time.Time
	cases := []struct {
		until, lost, ended, want time.Time
		lag                      time.Duration
	}{
		{zero, zero, ms(5), ms(5), 0},
		{zero, ms(3), ms(5), ms(3), 0},
		{zero, ms(7), ms(5), ms(5), 0},
		{zero, ms(7), zero, ms(7), 0},
		{ms(2), ms(7), ms(9), ms(2), 5 * time.Millisecond}, // a heartbeat timeout, its context cancelled late
		{ms(8), ms(3), ms(9), ms(3), 0},                    // a cut connection before the deadline
		{ms(20), zero, ms(9), ms(9), 0},                    // the code returned while the lock was valid
	}
	for _, c := range cases {
		g := ClientGrant{ValidUntil: c.until, LostAt: c.lost, EndedAt: c.ended}
		if got := g.GaveUpAt(); !got.Equal(c.want) {
			t.Errorf("GaveUpAt(valid until %v, lost %v, ended %v) = %v, want %v", c.until, c.lost, c.ended, got, c.want)
		}
		if got := g.CancelLag(); got != c.lag {
			t.Errorf("CancelLag(valid until %v, lost %v) = %v, want %v", c.until, c.lost, got, c.lag)
		}
	}
}
