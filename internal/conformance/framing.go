package conformance

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/monolock/monolock/internal/testsupport/poll"
	"github.com/monolock/monolock/protocol"
)

// A token of the usual size (a second of 2026 << 32, + 7).
const usualToken = uint64(1798761600)<<32 + 7

func acquired(token uint64) []byte { return protocol.AppendAcquired(nil, token) }
func waiting() []byte              { return protocol.AppendWaiting(nil) }

// answerAll answers every request with ACQUIRED(token) at once.
func answerAll(token uint64) func(Req) ([]byte, time.Duration) {
	return func(Req) ([]byte, time.Duration) { return acquired(token), 0 }
}

// granted starts the judged driver with req against a fresh fake server,
// grants the lock with token and checks the acquired event. answer then
// answers the heartbeats (nil: none are answered).
func (e *Env) granted(req Request, token uint64, answer func(Req) ([]byte, time.Duration)) (*Process, *ServerConn, *Responder) {
	return e.grantedOn(e.Fake(), req, token, answer)
}

// grantedOn is granted on the fake server f.
func (e *Env) grantedOn(f *FakeServer, req Request, token uint64, answer func(Req) ([]byte, time.Duration)) (*Process, *ServerConn, *Responder) {
	req.Address = f.Addr()
	p := e.StartJudged(req)
	c, err := f.Next(safety)
	e.must("connect", err)
	r, err := c.NextReq(safety)
	e.must("rule: ACQUIRE first", err)
	e.must("kit", c.Reply(acquired(token)))
	e.expectToken(p, token)
	if r.Heartbeat {
		e.Failf("rule: ACQUIRE first", "the first frame was HEARTBEAT")
	}
	if answer == nil {
		return p, c, nil
	}
	return p, c, c.Respond(answer, 0)
}

// expectToken awaits acquired and checks its token, digit for digit.
func (e *Env) expectToken(p *Process, token uint64) Event {
	ev := e.expect("rule 5 (the token reaches the caller)", p, "acquired", safety)
	if want := uintString(token); ev.Token != want {
		e.Failf("rule 5 (the token reaches the caller exactly)", "acquired token %q, want %q", ev.Token, want)
	}
	return ev
}

// awaitRequest waits until request index i has arrived on c.
func (e *Env) awaitRequest(c *ServerConn, i int, timeout time.Duration) Req {
	var req Req
	err := poll.Until(timeout, func() error {
		ended := false // read before the log: a request logged before the close counts
		select {
		case <-c.Ended():
			ended = true
		default:
		}
		if log := c.Log(); len(log) > i {
			req = log[i]
			return nil
		}
		if ended {
			return poll.Abort(fmt.Errorf("the client closed the connection after %d request(s), want at least %d", len(c.Log()), i+1))
		}
		return fmt.Errorf("only %d request(s) arrived, want at least %d", len(c.Log()), i+1)
	})
	if err != nil {
		e.Failf("rule 3 (heartbeats)", "%v", err)
	}
	return req
}

// noEvent fails if the driver reports anything within d (a loss, say).
func (e *Env) noEvent(rule string, p *Process, d time.Duration) {
	if ev, ok := p.Quiet(d); ok {
		e.Failf(rule, "unexpected event %s", ev)
	}
}

// releaseAndClose asks the driver to release and checks that the session
// ends promptly (rule 7: within 1 s, generous for a busy machine): RELEASE,
// which the kit answers with its close, or the client's close. How the
// release is sent is judged by the release-* scenarios. A reset counts as a
// close too: a client that closes while an answer waits unread in its
// socket resets the connection, as the kernel does.
func (e *Env) releaseAndClose(p *Process, c *ServerConn) {
	at := time.Now()
	e.must("driver", p.Release())
	e.expect("rule 7 (release)", p, "released", safety)
	end, _, err := c.WaitEnd(safety)
	e.must("rule 7 (release ends the session)", err)
	if released, _, ok := c.Released(); ok {
		end = released
	}
	e.between("rule 7 (release is prompt)", "the time from the release command to RELEASE or the FIN", end.Sub(at), 0, time.Second)
}

func framingScenarios() []Scenario {
	return []Scenario{
		{Name: "golden-bytes", Rule: "frames: ACQUIRE encoding, name as raw UTF-8, lease rounded up to whole ms", run: goldenBytes},
		{Name: "split-frames", Rule: "rule 2: whole frames from a stream split at every byte", run: splitFrames},
		{Name: "coalesced-frames", Rule: "rules 2, 4: several frames in one segment", run: coalescedFrames},
		{Name: "push-split-in-token", Rule: "rules 1, 2: a pushed ACQUIRED split inside its token", run: pushSplitInToken},
		{Name: "pushed-promotion", Rule: "rule 1: a permanent reader takes the pushed ACQUIRED unasked", run: pushedPromotion},
		{Name: "token-2^63", Rule: "rule 5: tokens of 2^63 and above reach the caller exactly", run: bigTokens},
		{Name: "lease-max", Rule: "frames: lease_ms 2^32 − 1 (the largest the wire carries) is sent as such and held", run: leaseMax},
		{Name: "bad-input", Rule: "validation before connecting", run: badInput},
	}
}

func goldenBytes(e *Env) {
	cases := []struct {
		name    string
		leaseUS int64
		want    string // hex
	}{
		// docs/protocol.md's example and protocol/testdata/golden.txt "acquire".
		{"nightly-import", 2_000_000, "0101000007d0000e6e696768746c792d696d706f7274"},
		// Raw UTF-8: ü (c3 bc), 锁 (e9 94 81); 13 bytes, not 10 characters.
		{"zürich-锁-1", 2_000_000, "0101000007d0000d7ac3bc726963682de994812d31"},
		// 1500.25 ms rounds up to 1501 (0x5dd), never down.
		{"round-up", 1_500_250, "0101000005dd0008726f756e642d7570"},
		// 300 ms stays 300 (0x12c): a binary float of 0.3 s must not round to 301.
		{"exact-300", 300_000, "01010000012c000965786163742d333030"},
	}
	for _, tc := range cases {
		f := e.Fake()
		req := NewRequest(f.Addr(), tc.name, 0)
		req.LeaseUS = tc.leaseUS
		p := e.StartJudged(req)
		c, err := f.Next(safety)
		e.must("connect", err)
		r, err := c.NextReq(safety)
		e.must("frames: ACQUIRE", err)
		if got := hex.EncodeToString(r.Bytes); got != tc.want {
			e.Failf("frames: golden ACQUIRE", "name %q lease %d µs: sent %s, want %s", tc.name, tc.leaseUS, got, tc.want)
		}
		e.must("kit", c.Reply(acquired(usualToken)))
		e.expectToken(p, usualToken)
		c.Respond(answerAll(usualToken), 0)
		e.releaseAndClose(p, c)
	}
}

func splitFrames(e *Env) {
	// Lease 2 s; every byte of every answer in its own segment, 3 ms apart.
	f := e.Fake()
	p := e.StartJudged(NewRequest(f.Addr(), "split", 2*time.Second))
	c, err := f.Next(safety)
	e.must("connect", err)
	_, err = c.NextReq(safety)
	e.must("frames: ACQUIRE", err)
	e.must("kit", c.ReplySplit(acquired(usualToken), 3*time.Millisecond))
	e.expectToken(p, usualToken)
	c.Respond(answerAll(usualToken), 3*time.Millisecond)
	e.awaitRequest(c, 4, safety)
	e.noEvent("rule 2 (whole frames)", p, 0)
	e.releaseAndClose(p, c)
}

func coalescedFrames(e *Env) {
	// WAITING and the pushed ACQUIRED in one segment, answering ACQUIRE.
	f := e.Fake()
	p := e.StartJudged(NewRequest(f.Addr(), "coalesced", 2*time.Second))
	c, err := f.Next(safety)
	e.must("connect", err)
	_, err = c.NextReq(safety)
	e.must("frames: ACQUIRE", err)
	e.must("kit", c.Reply(append(waiting(), acquired(usualToken)...)))
	e.expectToken(p, usualToken)
	c.Respond(answerAll(usualToken), 0)
	e.awaitRequest(c, 3, safety)
	e.noEvent("rules 2, 4 (coalesced frames)", p, 0)
	e.releaseAndClose(p, c)

	// A heartbeat's WAITING and the push in one segment (lease 400 ms: the
	// first heartbeat comes about 100 ms after ACQUIRE).
	f = e.Fake()
	p = e.StartJudged(NewRequest(f.Addr(), "coalesced-2", 400*time.Millisecond))
	c, err = f.Next(safety)
	e.must("connect", err)
	_, err = c.NextReq(safety)
	e.must("frames: ACQUIRE", err)
	e.must("kit", c.Reply(waiting()))
	_, err = c.NextReq(safety)
	e.must("rule 3 (heartbeats while waiting)", err)
	token := usualToken + 1
	e.must("kit", c.Reply(append(waiting(), acquired(token)...)))
	e.expectToken(p, token)
	c.Respond(answerAll(token), 0)
	e.awaitRequest(c, 4, safety)
	e.noEvent("rules 2, 4 (coalesced frames)", p, 0)
	e.releaseAndClose(p, c)
}

func pushSplitInToken(e *Env) {
	f := e.Fake()
	p := e.StartJudged(NewRequest(f.Addr(), "push-split", 10*time.Second))
	c, err := f.Next(safety)
	e.must("connect", err)
	_, err = c.NextReq(safety)
	e.must("frames: ACQUIRE", err)
	e.must("kit", c.Reply(waiting()))
	time.Sleep(50 * time.Millisecond)
	token := uint64(0x0102030405060708)
	// Type byte and the first 4 token bytes, 150 ms, the last 4.
	e.must("kit", c.WriteSplit(acquired(token), 150*time.Millisecond, 5, 4))
	e.expectToken(p, token)
	c.Respond(answerAll(token), 0)
	e.releaseAndClose(p, c)
}

func pushedPromotion(e *Env) {
	// Lease 10 s: the first heartbeat is due 2.5 s after ACQUIRE, so a client
	// that reads only after sending could not see the push within 2 s.
	f := e.Fake()
	p := e.StartJudged(NewRequest(f.Addr(), "promotion", 10*time.Second))
	c, err := f.Next(safety)
	e.must("connect", err)
	_, err = c.NextReq(safety)
	e.must("frames: ACQUIRE", err)
	e.must("kit", c.Reply(waiting()))
	e.noEvent("rule 4 (WAITING is not a grant)", p, 200*time.Millisecond)
	token := usualToken + 2
	pushed := time.Now()
	e.must("kit", c.Write(acquired(token)))
	ev := e.expect("rule 1 (permanent reader)", p, "acquired", 2*time.Second)
	if ev.Token != uintString(token) {
		e.Failf("rule 5", "acquired token %q, want %q", ev.Token, uintString(token))
	}
	for _, r := range c.Log() {
		if r.Index > 0 && r.At.After(pushed) && r.At.Before(ev.At) {
			e.Failf("rule 1 (the push arrives unasked)", "the client sent request %d %v after the push, before it reported acquired", r.Index, r.At.Sub(pushed).Round(time.Millisecond))
		}
	}
	c.Respond(answerAll(token), 0)
	e.releaseAndClose(p, c)
}

func bigTokens(e *Env) {
	for _, token := range []uint64{1<<63 + 1, ^uint64(0)} {
		// The heartbeat answers repeat the token, and a client that mangled
		// it would see a changed token and drop the lock.
		p, c, _ := e.granted(NewRequest("", "big-token", time.Second), token, answerAll(token))
		e.awaitRequest(c, 2, safety)
		e.noEvent("rule 5 (the token is kept exactly)", p, 0)
		e.releaseAndClose(p, c)
	}
}

// leaseMax: lease_ms 2^32 − 1 (about 49.7 days), the largest the wire
// carries: the client must send it as such and hold the lock. A client that
// keeps the lease in a 32-bit signed millisecond timer (or in a timer API
// that takes one) sees a negative or tiny delay, and heartbeats at once or
// gives up at once; one whose heartbeat is lease/4 sends none for 12 days.
func leaseMax(e *Env) {
	const rule = "frames (every lease the wire allows is accepted)"
	req := NewRequest("", "lease-max", 0)
	req.LeaseUS = (1<<32 - 1) * 1000
	f := e.Fake()
	req.Address = f.Addr()
	p := e.StartJudged(req)
	c, err := f.Next(safety)
	e.must("connect", err)
	_, err = c.NextReq(safety)
	e.must("rule: ACQUIRE first", err)
	if got := hex.EncodeToString(c.Log()[0].Bytes); got != "0101ffffffff00096c656173652d6d6178" {
		e.Failf(rule, "sent %s, want lease_ms ffffffff: 0101ffffffff00096c656173652d6d6178", got)
	}
	// A client whose timer overflows may give up before the grant: that is
	// this rule's failure too, named as such.
	e.must("kit", c.Reply(acquired(usualToken)))
	e.expect(rule+": the grant reaches the caller", p, "acquired", safety)
	c.Respond(answerAll(usualToken), 0)
	e.noEvent(rule+": the lock is held", p, 500*time.Millisecond)
	if n := len(c.Log()) - 1; n > 0 {
		e.Failf(rule, "%d heartbeat(s) within 500 ms of the grant, want none: the first is due lease/4 (12 days) after ACQUIRE", n)
	}
	e.releaseAndClose(p, c)
}

func badInput(e *Env) {
	cases := []struct {
		what    string
		name    []byte
		leaseUS int64
	}{
		{"an empty name", nil, 2_000_000},
		{"a 256-byte name", bytes.Repeat([]byte("a"), 256), 2_000_000},
		{"a name that is not UTF-8", []byte{'b', 'a', 'd', 0xff}, 2_000_000},
		{"lease 0", []byte("lease-0"), 0},
		{"a lease above 2^32 − 1 ms", []byte("lease-max"), (1 << 32) * 1000},
	}
	for _, tc := range cases {
		f := e.Fake()
		req := NewRequest(f.Addr(), "", 0)
		req.SetName(tc.name)
		req.LeaseUS = tc.leaseUS
		p := e.StartJudged(req)
		ev, err := p.Next(safety)
		e.must("validation before connecting", err)
		if ev.Event != "invalid-input" {
			e.Failf("validation before connecting", "%s: the driver printed %s, want invalid-input", tc.what, ev)
		}
		// 200 ms more for a connection that a wrong client opens anyway.
		time.Sleep(200 * time.Millisecond)
		if n := f.Accepted(); n != 0 {
			e.Failf("validation before connecting", "%s: the client connected (%d connection(s)) although the input is invalid", tc.what, n)
		}
	}

}
