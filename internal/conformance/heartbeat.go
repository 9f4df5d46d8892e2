package conformance

import (
	"fmt"
	"time"
)

func heartbeatScenarios() []Scenario {
	return []Scenario{
		{Name: "heartbeat-fast", Rule: "rule 3: a heartbeat every lease/4 on a fast link", run: heartbeatFast(2*time.Second, 8)},
		{Name: "heartbeat-400ms", Rule: "rule 3 (protocol.md scenario 6): lease 400 ms, about every 100 ms", Attempts: 3, run: heartbeatFast(400*time.Millisecond, 12)},
		{Name: "heartbeat-rtt", Rule: "rule 3: interval = lease/4 − 2 × smoothed RTT, EWMA α = 0.2", run: heartbeatRTT},
		{Name: "heartbeat-slow", Rule: "rule 3: RTT ≥ lease/4, the next heartbeat right after each answer", Attempts: 3, run: heartbeatSlow},
	}
}

// sendIntervals are the times between consecutive sends, request i to i+1.
func sendIntervals(log []Req) []time.Duration {
	var out []time.Duration
	for i := 1; i < len(log); i++ {
		out = append(out, log[i].At.Sub(log[i-1].At))
	}
	return out
}

// heartbeatFast: answers at once; the median send-to-send interval must be
// within ±20 % of lease/4 (the median ignores a late timer or two on a busy
// machine), and no two consecutive intervals may add up to less than twice
// the floor min(100 ms, lease/4), less 40 ms.
func heartbeatFast(lease time.Duration, beats int) func(e *Env) {
	return func(e *Env) {
		p, c, _ := e.granted(NewRequest("", "heartbeat", lease), usualToken, answerAll(usualToken))
		e.awaitRequest(c, beats, safety+3*lease)
		log := c.Log()[:beats+1]
		iv := sendIntervals(log)
		base := lease / 4
		m := median(iv)
		e.between("rule 3 (heartbeat every lease/4)", "the median interval between sends", m, base*8/10, base*12/10)
		// The floor, judged on pairs of consecutive intervals: when the kit
		// reads one request late, that interval grows and the next shrinks by
		// as much, and their sum is what the client did.
		floor := min(100*time.Millisecond, base)
		for i := 1; i < len(iv); i++ {
			if pair := iv[i-1] + iv[i]; pair < 2*floor-40*time.Millisecond {
				e.Failf("rule 3 (never below the floor)", "intervals %d and %d were %v and %v, together below 2 × min(100ms, lease/4) = %v", i-1, i, iv[i-1].Round(time.Millisecond), iv[i].Round(time.Millisecond), 2*floor)
			}
		}
		e.noEvent("rule 3", p, 0)
		e.releaseAndClose(p, c)
	}
}

// heartbeatRTT: lease 2 s; the answers to ACQUIRE and heartbeats 1–5 are
// delayed 100 ms, later ones are not. The kit replays the rule on the
// round-trip times it observed itself (its read of each request to its write
// of the answer, which on a loaded machine is more than the 100 ms it waits),
// EWMA α = 0.2 seeded by the first sample, and compares each interval with
// what the rule gives:
//   - after the delayed answers (about 500 − 2×100 = 300 ms), the median of
//     interval − expected within ±100 ms: a client ignoring the RTT is 200 ms
//     off;
//   - after the first three fast answers (about 340, 372 and 398 ms, as the
//     average falls gradually), the median of interval − expected − lag
//     within ±64 ms: a client without smoothing goes straight back to
//     500 ms, 160, 128 and 102 ms more, a median twice that bound.
//
// The lag is the median of the first check. The client measures each round
// trip from its send to its read, which on a loaded machine is longer than
// the kit's read-to-write by the time the bytes wait for either side to be
// scheduled; that inflates the client's smoothed RTT by about as much
// throughout, and shortens every interval alike. The first check measures it
// in the same run, and the second is judged net of it. A median, not a sum,
// so that one timer that fires late on a busy machine moves one interval,
// not the verdict.
func heartbeatRTT(e *Env) {
	const lease = 2 * time.Second
	delayed := func(r Req) ([]byte, time.Duration) {
		if r.Index <= 5 {
			return acquired(usualToken), 100 * time.Millisecond
		}
		return acquired(usualToken), 0
	}
	f := e.Fake()
	p := e.StartJudged(NewRequest(f.Addr(), "rtt", lease))
	c, err := f.Next(safety)
	e.must("connect", err)
	r := c.Respond(delayed, 0)
	e.expectToken(p, usualToken)
	e.awaitRequest(c, 9, safety)
	log := c.Log()[:10]
	iv := sendIntervals(log)
	expected := expectedIntervals(lease, log, r)
	var off []time.Duration
	for i := 0; i <= 5; i++ {
		off = append(off, iv[i]-expected[i])
	}
	lag := median(off)
	e.between("rule 3 (interval shrinks by twice the smoothed RTT)",
		fmt.Sprintf("the median of (interval − expected) after the delayed answers (intervals %v, expected %v)", roundAll(iv[:6]), roundAll(expected[:6])),
		lag, -100*time.Millisecond, 100*time.Millisecond)
	var fast []time.Duration
	for i := 6; i <= 8; i++ {
		fast = append(fast, iv[i]-expected[i]-lag)
	}
	e.between("rule 3 (EWMA α = 0.2: the RTT average falls gradually)",
		fmt.Sprintf("the median of (interval − expected − lag) of the three intervals after the first fast answers (intervals %v, expected %v, lag %v)", roundAll(iv[6:9]), roundAll(expected[6:9]), lag.Round(time.Millisecond)),
		median(fast), -64*time.Millisecond, 64*time.Millisecond)
	e.noEvent("rule 3", p, 0)
	e.releaseAndClose(p, c)
}

// expectedIntervals replays the schedule of rule 3 on the round-trip times
// the kit observed: the interval after request i is clamp(lease/4 − 2 ×
// smoothed RTT, min(100 ms, lease/4), lease/4), or the answer's arrival when
// that is later.
func expectedIntervals(lease time.Duration, log []Req, r *Responder) []time.Duration {
	base := lease / 4
	floor := min(100*time.Millisecond, base)
	var srtt time.Duration
	out := make([]time.Duration, len(log)-1)
	for i := range out {
		rtt := r.AnsweredAt(i).Sub(log[i].At)
		if i == 0 {
			srtt = rtt
		} else {
			srtt += (rtt - srtt) / 5
		}
		out[i] = max(min(max(base-2*srtt, floor), base), rtt)
	}
	return out
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}

// heartbeatSlow: lease 2 s, every answer delayed 600 ms (more than lease/4 =
// 500 ms). The interval (clamped to the floor, 100 ms) has passed when each
// answer arrives, so the next heartbeat goes at once: the median gap from an
// answer to the next heartbeat must be under 90 ms (a client that waits an
// interval after the answer would show 100 ms or more).
//
// The client keeps the lock while two round trips in a row take less than
// 0.8 × lease: 0.3 × lease each leaves 0.2 × lease, 400 ms, for a loaded
// machine's scheduling (with a 1 s lease and 300 ms it was 200 ms, and a
// client on a busy machine gave up).
func heartbeatSlow(e *Env) {
	const lease = 2 * time.Second
	f := e.Fake()
	p := e.StartJudged(NewRequest(f.Addr(), "slow", lease))
	c, err := f.Next(safety)
	e.must("connect", err)
	r := c.Respond(func(Req) ([]byte, time.Duration) { return acquired(usualToken), lease * 3 / 10 }, 0)
	e.expectToken(p, usualToken)
	e.awaitRequest(c, 7, safety)
	log := c.Log()
	var gaps []time.Duration
	for i := 1; i <= 6; i++ {
		gaps = append(gaps, log[i+1].At.Sub(r.AnsweredAt(i)))
	}
	e.between("rule 3 (next heartbeat at once when the answer is late)", "the median gap from an answer to the next heartbeat", median(gaps), 0, 90*time.Millisecond)
	e.noEvent("rule 3", p, 0)
	e.releaseAndClose(p, c)
}
