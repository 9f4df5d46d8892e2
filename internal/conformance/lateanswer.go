package conformance

import (
	"time"

	"github.com/monolock/monolock/protocol"
)

// Answers that come later than the heartbeat interval (rule 3: the next
// heartbeat then goes at once) may be followed, in the same read, by a frame
// the server sends on its own: a promotion's ACQUIRED, or an ERROR. Each
// request gets one answer; what follows it answers nothing and is legal. A
// client that, having sent its next heartbeat, takes that frame for a
// second answer (a protocol violation) breaks these.
func lateAnswerScenarios() []Scenario {
	return []Scenario{
		{Name: "late-answer-then-push", Rule: "rules 1, 3, 4: a late WAITING and a promotion's ACQUIRED in one read: granted", run: lateAnswerThenPush},
		{Name: "late-answer-then-0x01", Rule: "rules 3, 6: a late WAITING and ERROR 0x01 in one read: reconnected under run", run: lateAnswerThenShutdown},
		{Name: "late-answer-then-0x02", Rule: "rules 3, 8: a late ACQUIRED and ERROR 0x02 in one read while holding: lost with code 2", run: lateAnswerThenAdminClose},
	}
}

// lateLease and lateBy: the heartbeat interval is 500 ms, and its answer
// comes 700 ms after its send — later than the interval, well before the
// give-up at 1.6 s.
const (
	lateLease = 2 * time.Second
	lateBy    = 700 * time.Millisecond
)

// lateAnswer takes the next request, heartbeat 1, and writes, lateBy after
// its send, its answer followed by more in one write.
func (e *Env) lateAnswer(c *ServerConn, answer, more []byte) {
	req, err := c.NextReq(safety)
	e.must("rule 3 (heartbeats)", err)
	if req.Index != 1 {
		e.Failf("kit", "took request %d, want heartbeat 1", req.Index)
	}
	time.Sleep(time.Until(req.At.Add(lateBy)))
	e.must("kit", c.Reply(append(append([]byte(nil), answer...), more...)))
}

// queued starts the judged client (mode) on a fresh fake server and answers
// its ACQUIRE with WAITING.
func (e *Env) queued(name, mode string) (*FakeServer, *Process, *ServerConn) {
	f := e.Fake()
	req := NewRequest(f.Addr(), name, lateLease)
	req.Mode = mode
	p := e.StartJudged(req)
	c, err := f.Next(safety)
	e.must("connect", err)
	_, err = c.NextReq(safety)
	e.must("frames: ACQUIRE", err)
	e.must("kit", c.Reply(waiting()))
	return f, p, c
}

// lateAnswerThenPush: queued; heartbeat 1 is answered late with WAITING and,
// in the same write, the promotion's ACQUIRED. The client must report the
// grant, and answer-for-answer go on heartbeating while held.
func lateAnswerThenPush(e *Env) {
	const rule = "rules 1, 4 (a push after a late answer is a grant, not a second answer)"
	token := usualToken + 3
	_, p, c := e.queued("late-push", ModeAcquire)
	e.lateAnswer(c, waiting(), acquired(token))
	ev := e.expect(rule, p, "acquired", safety)
	if ev.Token != uintString(token) {
		e.Failf(rule, "acquired token %q, want %q", ev.Token, uintString(token))
	}
	c.Respond(answerAll(token), 0)
	e.awaitRequest(c, 3, safety)
	e.noEvent(rule, p, 0)
	e.releaseAndClose(p, c)
}

// lateAnswerThenShutdown: run mode, queued; heartbeat 1 is answered late
// with WAITING and, in the same write, ERROR 0x01, and the kit closes. The
// client must reconnect (after its random wait) and not report anything.
func lateAnswerThenShutdown(e *Env) {
	const rule = "rule 6 (ERROR 0x01 after a late answer: reconnect under run)"
	f, p, c := e.queued("late-0x01", ModeRun)
	e.lateAnswer(c, waiting(), errorFrame(protocol.CodeShuttingDown, "server shutting down"))
	c.Close()
	c2, err := f.Next(safety)
	e.must(rule, err)
	_, err = c2.NextReq(safety)
	e.must("frames: ACQUIRE", err)
	e.must("kit", c2.Reply(acquired(usualToken)))
	e.expectToken(p, usualToken)
	c2.Respond(answerAll(usualToken), 0)
	e.releaseAndClose(p, c2)
}

// lateAnswerThenAdminClose: held; heartbeat 1 is answered late with its
// ACQUIRED and, in the same write, ERROR 0x02, and the kit closes. The
// client must report the loss with code 2, the server's word, not a
// protocol violation.
func lateAnswerThenAdminClose(e *Env) {
	const rule = "rule 8 (ERROR 0x02 after a late answer is a loss with its code)"
	p, c, _ := e.granted(NewRequest("", "late-0x02", lateLease), usualToken, nil)
	e.lateAnswer(c, acquired(usualToken), errorFrame(protocol.CodeClosedByAdmin, "closed by administrator"))
	c.Close()
	lost := e.expect(rule, p, "lost", safety)
	if lost.Code == nil || *lost.Code != int(protocol.CodeClosedByAdmin) {
		e.Failf(rule, "the driver printed %s, want code 2", lost)
	}
	e.must("driver", p.Release())
	if ev, err := p.Next(safety); err != nil || (ev.Event != "released" && ev.Event != "work-stopped") {
		e.Failf("release after loss is harmless", "after the release: %v %v, want the released event", ev, err)
	}
}
