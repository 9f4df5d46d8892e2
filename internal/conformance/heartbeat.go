package conformance

import (
	"time"
)

func heartbeatScenarios() []Scenario {
	return []Scenario{
		{Name: "heartbeat-fast", Rule: "rule 3: a heartbeat every lease/4 on a fast link", run: heartbeatFast(2*time.Second, 8)},
		{Name: "heartbeat-400ms", Rule: "rule 3 (protocol.md scenario 6): lease 400 ms, about every 100 ms", run: heartbeatFast(400*time.Millisecond, 12)},
		{Name: "heartbeat-rtt", Rule: "rule 3: interval = lease/4 − 2 × smoothed RTT, EWMA α = 0.2", run: heartbeatRTT},
		{Name: "heartbeat-slow", Rule: "rule 3: RTT ≥ lease/4, the next heartbeat right after each answer", run: heartbeatSlow},
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
// machine), and no interval may be shorter than the floor min(100 ms,
// lease/4) by more than 20 ms.
func heartbeatFast(lease time.Duration, beats int) func(e *Env) {
	return func(e *Env) {
		p, c, _ := e.granted(NewRequest("", "heartbeat", lease), usualToken, answerAll(usualToken))
		e.awaitRequest(c, beats, safety+3*lease)
		log := c.Log()[:beats+1]
		iv := sendIntervals(log)
		base := lease / 4
		m := median(iv)
		e.between("rule 3 (heartbeat every lease/4)", "the median interval between sends", m, base*8/10, base*12/10)
		floor := min(100*time.Millisecond, base)
		for i, d := range iv {
			if d < floor-20*time.Millisecond {
				e.Failf("rule 3 (never below the floor)", "interval %d was %v, below min(100ms, lease/4) = %v", i, d.Round(time.Millisecond), floor)
			}
		}
		e.noEvent("rule 3", p, 0)
		e.releaseAndClose(p, c)
	}
}

// heartbeatRTT: lease 2 s; the answers to ACQUIRE and heartbeats 1–5 are
// delayed 100 ms, later ones are not. With the first sample seeding the
// average, the intervals after requests 0–5 are 500 − 2×100 = 300 ms (median
// within ±60 ms), and after request 6 (first fast answer) the average is
// 0.8 × 100 = 80 ms, so 340 ms: accepted in [280, 430] ms. A client without
// smoothing would go straight back to 500 ms; one ignoring the RTT stays at
// 500 throughout.
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
	c.Respond(delayed, 0)
	e.expectToken(p, usualToken)
	e.awaitRequest(c, 8, safety)
	iv := sendIntervals(c.Log()[:9])
	e.between("rule 3 (interval shrinks by twice the smoothed RTT)", "the median interval after the delayed answers", median(iv[:6]), 240*time.Millisecond, 360*time.Millisecond)
	e.between("rule 3 (EWMA α = 0.2: the RTT average falls gradually)", "the interval after the first undelayed answer", iv[6], 280*time.Millisecond, 430*time.Millisecond)
	e.noEvent("rule 3", p, 0)
	e.releaseAndClose(p, c)
}

// heartbeatSlow: lease 1 s, every answer delayed 300 ms (more than lease/4 =
// 250 ms). The interval (clamped to the floor, 100 ms) has passed when each
// answer arrives, so the next heartbeat goes at once: the median gap from an
// answer to the next heartbeat must be under 60 ms (a client that waits an
// interval after the answer would show 100 ms or more).
func heartbeatSlow(e *Env) {
	const lease = time.Second
	f := e.Fake()
	p := e.StartJudged(NewRequest(f.Addr(), "slow", lease))
	c, err := f.Next(safety)
	e.must("connect", err)
	r := c.Respond(func(Req) ([]byte, time.Duration) { return acquired(usualToken), 300 * time.Millisecond }, 0)
	e.expectToken(p, usualToken)
	e.awaitRequest(c, 7, safety)
	log := c.Log()
	var gaps []time.Duration
	for i := 1; i <= 6; i++ {
		gaps = append(gaps, log[i+1].At.Sub(r.AnsweredAt(i)))
	}
	e.between("rule 3 (next heartbeat at once when the answer is late)", "the median gap from an answer to the next heartbeat", median(gaps), 0, 60*time.Millisecond)
	e.noEvent("rule 3", p, 0)
	e.releaseAndClose(p, c)
}
