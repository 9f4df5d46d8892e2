package conformance

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/monolock/monolock/protocol"
)

func errorScenarios() []Scenario {
	return []Scenario{
		{Name: "errors-not-retried", Rule: "rule 6: codes 0x10 and above (0x10–0x18, unknown 0x7f) are reported, not retried", run: errorsNotRetried},
		{Name: "error-0x05-backoff", Rule: "rule 6: a code below 0x10 other than 0x01 is retried with backoff", run: errorBackoff},
		{Name: "error-0x01-random-wait", Rule: "rule 6: after 0x01 reconnect after a random wait in [0, min(1 s, lease/4)]", run: errorShutdownRandomWait},
		{Name: "error-reasons", Rule: "frames: ERROR with an empty and a 255-byte reason", run: errorReasons},
		{Name: "error-while-holding", Rule: "rule 8: an ERROR while holding is a loss", run: errorWhileHolding},
	}
}

func errorFrame(code protocol.Code, reason string) []byte {
	return protocol.AppendError(nil, code, reason)
}

// reason255 is 255 bytes of multi-byte UTF-8: 127 × "é" (2 bytes) and "!".
var reason255 = strings.Repeat("é", 127) + "!"

// expectError awaits the error event and checks code, class and reason.
func (e *Env) expectError(p *Process, code protocol.Code, reason string) Event {
	ev, err := p.Next(safety)
	e.must("rule 6 (errors are reported)", err)
	if ev.Event != "error" || ev.Code == nil || *ev.Code != int(code) {
		e.Failf("rule 6 (errors are reported with their code)", "the driver printed %s, want an error event with code %d", ev, code)
	}
	if want := code < 0x10; ev.Retriable == nil || *ev.Retriable != want {
		e.Failf("rule 6 (errors by range)", "code 0x%02x reported with retriable %v, want %v", uint8(code), fmtBoolPtr(ev.Retriable), want)
	}
	if ev.Reason != reason {
		e.Failf("frames (ERROR reason)", "code 0x%02x: reason %q, want the server's %q unchanged", uint8(code), ev.Reason, reason)
	}
	return ev
}

func fmtBoolPtr(b *bool) string {
	if b == nil {
		return "(absent)"
	}
	return fmt.Sprint(*b)
}

// errorsNotRetried: run mode, one session per code, ERROR answering ACQUIRE.
// A retrying client reconnects within its first backoff (~100 ms), so 700 ms
// without a new connection tells "not retried".
func errorsNotRetried(e *Env) {
	codes := []protocol.Code{0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x7f}
	for _, code := range codes {
		f, p, c := e.runToAcquire("client-error")
		reason := fmt.Sprintf("conformance: code 0x%02x", uint8(code))
		e.must("kit", c.Reply(errorFrame(code, reason)))
		c.Close()
		e.expectError(p, code, reason)
		time.Sleep(700 * time.Millisecond)
		if n := f.Accepted(); n != 1 {
			e.Failf("rule 6 (codes 0x10 and above are not retried)", "code 0x%02x: %d connections, want 1", uint8(code), n)
		}
		p.Close()
	}
}

// errorBackoff: run mode; ERROR 0x05 twice, then a grant. Both errors must
// be retried, and the two waits before reconnecting must add up to at least
// 100 ms: backoff, not a reconnect loop.
func errorBackoff(e *Env) {
	f := e.Fake()
	req := NewRequest(f.Addr(), "server-condition", 2*time.Second)
	req.Mode = ModeRun
	p := e.StartJudged(req)
	var waits time.Duration
	var errAt time.Time
	for attempt := 1; attempt <= 3; attempt++ {
		c, err := f.Next(safety)
		e.must("rule 6 (a code below 0x10 is retried)", err)
		r, err := c.NextReq(safety)
		e.must("frames: ACQUIRE", err)
		if attempt > 1 {
			waits += r.At.Sub(errAt)
		}
		if attempt < 3 {
			errAt = time.Now()
			e.must("kit", c.Reply(errorFrame(0x05, "conformance: a server condition")))
			c.Close()
			continue
		}
		e.must("kit", c.Reply(acquired(usualToken)))
		e.expectToken(p, usualToken)
		c.Respond(answerAll(usualToken), 0)
		if waits < 100*time.Millisecond {
			e.Failf("rule 6 (retry with backoff)", "the two reconnects after ERROR 0x05 came %v after the errors in total, want at least 100ms", waits.Round(time.Millisecond))
		}
		e.releaseAndClose(p, c)
	}
}

// errorShutdownRandomWait: run mode, lease 4 s; twelve times WAITING, then
// ERROR 0x01; then a grant. Each reconnect must come within the rule's
// longest wait, min(1 s, lease/4) = 1 s, plus 500 ms for a busy machine; and
// the waits must not be short: the fourth longest of the twelve at least
// 200 ms. Uniform waits in [0, 1 s] fail that when nine of the twelve fall
// below 200 ms, about once in 17,000 runs; a client that reconnects at once
// passes it only if four of its reconnects stall 200 ms each.
func errorShutdownRandomWait(e *Env) {
	const lease, reconnects = 4 * time.Second, 12
	const longest = time.Second // min(1 s, lease/4)
	f := e.Fake()
	req := NewRequest(f.Addr(), "shutdown", lease)
	req.Mode = ModeRun
	p := e.StartJudged(req)
	var waits []time.Duration
	var errAt time.Time
	for attempt := 0; ; attempt++ {
		c, err := f.Next(safety)
		e.must("rule 6 (reconnect after 0x01)", err)
		r, err := c.NextReq(safety)
		e.must("frames: ACQUIRE", err)
		if attempt > 0 {
			w := r.At.Sub(errAt)
			e.between("rule 6 (reconnect after a random wait of at most min(1 s, lease/4) after 0x01)",
				fmt.Sprintf("the time from ERROR 0x01 to the new ACQUIRE (reconnect %d)", attempt), w, 0, longest+500*time.Millisecond)
			waits = append(waits, w)
		}
		if attempt < reconnects {
			e.must("kit", c.Reply(waiting()))
			errAt = time.Now()
			e.must("kit", c.Write(errorFrame(protocol.CodeShuttingDown, "server shutting down")))
			c.Close()
			continue
		}
		sorted := slices.Clone(waits)
		slices.Sort(sorted)
		if fourth := sorted[len(sorted)-4]; fourth < 200*time.Millisecond {
			e.Failf("rule 6 (a random wait, uniform in [0, min(1 s, lease/4)], after 0x01)",
				"the waits before the %d reconnects were %v: the fourth longest only %v, want at least 200ms (every client of the server gets 0x01 at once)",
				reconnects, roundAll(waits), fourth.Round(time.Millisecond))
		}
		e.must("kit", c.Reply(acquired(usualToken)))
		e.expectToken(p, usualToken)
		c.Respond(answerAll(usualToken), 0)
		e.releaseAndClose(p, c)
		return
	}
}

// errorReasons: acquire mode; ERROR 0x14 with an empty reason, and 0x7f with
// a 255-byte reason: each reported with its code and the reason unchanged.
func errorReasons(e *Env) {
	for _, tc := range []struct {
		code   protocol.Code
		reason string
	}{{0x14, ""}, {0x7f, reason255}} {
		f := e.Fake()
		p := e.StartJudged(NewRequest(f.Addr(), "reasons", 2*time.Second))
		c, err := f.Next(safety)
		e.must("connect", err)
		_, err = c.NextReq(safety)
		e.must("frames: ACQUIRE", err)
		e.must("kit", c.Reply(errorFrame(tc.code, tc.reason)))
		c.Close()
		e.expectError(p, tc.code, tc.reason)
	}
}

// errorWhileHolding: lease 10 s; ERROR 0x02 with a 255-byte reason while
// holding: lost with code 2 within 2 s.
func errorWhileHolding(e *Env) {
	p, c, _ := e.granted(NewRequest("", "admin-closed", 10*time.Second), usualToken, answerAll(usualToken))
	sent := time.Now()
	e.must("kit", c.Write(errorFrame(protocol.CodeClosedByAdmin, reason255)))
	c.Close()
	lost := e.expect("rule 8 (an ERROR is a loss)", p, "lost", safety)
	if lost.Code == nil || *lost.Code != 2 {
		e.Failf("rule 8 (an ERROR is a loss, with its code)", "the driver printed %s, want code 2", lost)
	}
	e.between("rule 8 (an ERROR is a loss at once)", "the time from the ERROR to the lost event", lost.At.Sub(sent), 0, 2*time.Second)
	e.expect("rule 8 (the work stops)", p, "work-stopped", safety)
	e.must("driver", p.Release())
	e.expect("release after loss is harmless", p, "released", safety)
}

// runToAcquire starts the judged client in run mode (retrying) against a
// fresh fake server and reads its ACQUIRE on the first connection.
func (e *Env) runToAcquire(name string) (*FakeServer, *Process, *ServerConn) {
	f := e.Fake()
	req := NewRequest(f.Addr(), name, 2*time.Second)
	req.Mode = ModeRun
	p := e.StartJudged(req)
	c, err := f.Next(safety)
	e.must("connect", err)
	_, err = c.NextReq(safety)
	e.must("frames: ACQUIRE", err)
	return f, p, c
}
