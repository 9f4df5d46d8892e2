package conformance

import (
	"bytes"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/monolock/monolock/internal/testsupport/poll"
	"github.com/monolock/monolock/protocol"
)

func giveUpScenarios() []Scenario {
	return []Scenario{
		{Name: "give-up-holding", Rule: "rule 8, give-up: lost 0.8 × lease after the newest answered send; silent; closed once the work stopped", run: giveUpHolding},
		{Name: "give-up-work-hangs", Rule: "give-up: the connection stays open until lease has passed since the last send", run: giveUpWorkHangs},
		{Name: "give-up-late-answer", Rule: "rule 8, give-up: at 0.8 × lease, not later: an answer 0.85 × lease after the newest answered send finds the client gone", run: giveUpLateAnswer},
		{Name: "give-up-delayed-answer", Rule: "rule 8, give-up: timed from the send of the newest answered request, not from the answer's receipt", run: giveUpDelayedAnswer},
		{Name: "give-up-error-after-deadline", Rule: "the order of simultaneous things: a deadline that has passed is taken before a frame read at the same time; an ERROR read after the give-up deadline finds the lock lost by silence",
			run: giveUpErrorAfterDeadline},
		{Name: "give-up-acquire", Rule: "rule 8: the give-up clock runs while ACQUIRE is unanswered", run: giveUpAcquire},
		{Name: "eof-while-holding", Rule: "rule 8: end of stream while holding is a loss at once", run: eofWhileHolding},
		{Name: "unknown-frame-while-holding", Rule: "rules 7, 8: an unknown frame is a loss at once; closed once the work stopped", run: unknownFrameWhileHolding},
		{Name: "waiting-after-grant", Rule: "rules 4, 7: WAITING after ACQUIRED is a protocol violation and a loss", run: unexpectedAnswer(waiting(), "WAITING")},
		{Name: "changed-token", Rule: "rules 4, 7: an ACQUIRED with another token than the grant's is a protocol violation and a loss", run: unexpectedAnswer(acquired(usualToken+1), "ACQUIRED with another token")},
	}
}

// Tolerances of the give-up rule. The client gives up 0.8 × lease after the
// send of the newest answered request; the kit sees that send a little later
// than it happened (on a loaded machine seen 110 ms late) and the event a
// little later than it was printed (unless the driver stamped it with the
// client's decision, mono_ns), so the window is [0.7, 1.0] × lease:
// earlier is a client that gives up too soon, later one that may still work
// when the server hands the lock on. give-up-late-answer separates 0.8 from
// 0.9 × lease by the client's own decision instead.
const (
	giveUpEarliest = 70 // per cent of the lease
	giveUpLatest   = 100
	// closeSlack is how late the close may come after the time it is due.
	closeSlack = 750 * time.Millisecond
)

// withholdFrom answers requests below index n with ACQUIRED(token) and never
// answers the others.
func withholdFrom(n int, token uint64) func(Req) ([]byte, time.Duration) {
	return func(r Req) ([]byte, time.Duration) {
		if r.Index >= n {
			return nil, 0
		}
		return acquired(token), 0
	}
}

// lostOnSilence checks the loss event against the newest answered send and
// that nothing was sent after the withheld request.
func (e *Env) lostOnSilence(p *Process, c *ServerConn, lease time.Duration, withheld int) (lost Event, lastSend Req) {
	lost = e.expect("rule 8 (give up on silence)", p, "lost", safety+lease)
	log := c.Log()
	if len(log) <= withheld {
		e.Failf("kit", "the withheld request %d never came", withheld)
	}
	answered, last := log[withheld-1], log[withheld]
	e.between("rule 8 (give up 0.8 × lease after the send of the newest answered request)",
		"the time from that send to the lost event", lost.At.Sub(answered.At),
		lease*giveUpEarliest/100, lease*giveUpLatest/100)
	if len(log) > withheld+1 {
		e.Failf("rule 3 (at most one request in flight)", "%d request(s) sent after the unanswered one", len(log)-withheld-1)
	}
	return lost, last
}

// giveUpHolding: lease 2 s, heartbeat 3 never answered, work takes 600 ms to
// stop. The connection must stay open until the work stopped (closed no
// earlier than 300 ms after the lost event: half the stop time, for event
// latency) and be closed by the withheld send + lease (+ 750 ms slack).
func giveUpHolding(e *Env) {
	const lease = 2 * time.Second
	req := NewRequest("", "give-up", lease)
	req.WorkStopMS = 600
	p, c, _ := e.granted(req, usualToken, withholdFrom(3, usualToken))
	lost, last := e.lostOnSilence(p, c, lease, 3)
	stopped := e.expect("give-up (the work stops)", p, "work-stopped", safety)
	end, _, err := c.WaitEnd(safety)
	e.must("give-up (the connection is closed once the work stopped)", err)
	if d := end.Sub(lost.At); d < 300*time.Millisecond {
		e.Failf("give-up (closed only once the work has stopped)", "the connection closed %v after the lost event, while the work still ran (it stopped %v after)", d.Round(time.Millisecond), stopped.At.Sub(lost.At).Round(time.Millisecond))
	}
	e.between("give-up (closed by the last send + lease)", "the time from the last send to the close", end.Sub(last.At), 0, lease+closeSlack)
	e.must("driver", p.Release())
	e.expect("release after loss is harmless", p, "released", safety)
}

// giveUpWorkHangs: as giveUpHolding, but the work never stops by itself:
// the close is due when lease has passed since the last send; accepted from
// 250 ms before (the kit may see the send late) to 750 ms after. A client
// that closes at the give-up would close about 0.55 × lease after that send.
func giveUpWorkHangs(e *Env) {
	const lease = 2 * time.Second
	req := NewRequest("", "give-up-hangs", lease)
	req.WorkStopMS = WorkNeverStops
	p, c, _ := e.granted(req, usualToken, withholdFrom(3, usualToken))
	_, last := e.lostOnSilence(p, c, lease, 3)
	end, _, err := c.WaitEnd(safety)
	e.must("give-up (closed when the lease has passed since the last send)", err)
	e.between("give-up (closed when the lease has passed since the last send, not before)", "the time from the last send to the close", end.Sub(last.At), lease-250*time.Millisecond, lease+closeSlack)
	e.must("driver", p.Release())
	e.expect("release after loss", p, "work-stopped", safety)
	e.expect("release after loss is harmless", p, "released", safety)
}

// giveUpLateAnswer: lease 4 s; heartbeats 1 and 2 answered at once,
// heartbeat 3 answered only 0.85 × lease (3.4 s) after the send of heartbeat
// 2, work stops at once. A client that gives up at 0.8 × lease (3.2 s) has
// reported the loss and closed by then and takes nothing more; one that
// gives up at 0.9 × lease or later takes the answer and heartbeats on. The
// answer's time sits halfway, 200 ms from either, which is the slack a busy
// machine gets on each side; the lost event's own time is not judged here.
func giveUpLateAnswer(e *Env) {
	const lease = 4 * time.Second
	const rule = "rule 8 (give up 0.8 × lease after the send of the newest answered request, not later)"
	p, c, _ := e.granted(NewRequest("", "give-up-late", lease), usualToken, withholdFrom(3, usualToken))
	answered := e.awaitRequest(c, 2, safety)
	e.awaitRequest(c, 3, safety)
	late := answered.At.Add(lease * 85 / 100)
	time.Sleep(time.Until(late))
	_ = c.Reply(acquired(usualToken)) // the client may have closed: that is the point
	lost, err := p.Next(safety + lease)
	e.must(rule, err)
	if lost.Event != "lost" {
		e.Failf(rule, "the driver printed %s, want a lost event", lost)
	}
	if n := len(c.Log()); n > 4 {
		e.Failf(rule, "the answer to heartbeat 3 came 0.85 × lease (%v) after the send of heartbeat 2 and the client took it: it sent %d more request(s), and reported the loss only %v after that send",
			lease*85/100, n-4, lost.At.Sub(answered.At).Round(time.Millisecond))
	}
	if lost.At.Before(late) {
		return
	}
	// The loss was reported after the late answer: it must not have been
	// taken, which the client shows by sending nothing more until the close.
	_, _, err = c.WaitEnd(safety)
	e.must("give-up (closed once the work stopped)", err)
	if n := len(c.Log()); n > 4 {
		e.Failf(rule, "the client took the answer that came 0.85 × lease after the newest answered send: %d more request(s)", n-4)
	}
}

// giveUpDelayedAnswer: lease 4 s; the answer to heartbeat 2 is delayed
// 0.3 × lease (1.2 s), heartbeat 3 is never answered. The give-up is due 0.8
// × lease after heartbeat 2's send, the newest answered request: the
// server's lease runs from there too. A client that times it from the
// answer's receipt gives up about 1.1 × lease after that send, when the
// server may already have handed the lock on: 0.1 × lease (400 ms) past the
// window. The delayed answer comes about 1 s before the give-up due since
// heartbeat 1's send (0.25 × lease earlier), so a right client on a busy
// machine takes it.
func giveUpDelayedAnswer(e *Env) {
	const lease = 4 * time.Second
	answer := func(r Req) ([]byte, time.Duration) {
		switch {
		case r.Index == 2:
			return acquired(usualToken), lease * 3 / 10
		case r.Index >= 3:
			return nil, 0
		}
		return acquired(usualToken), 0
	}
	req := NewRequest("", "give-up-delayed", lease)
	p, c, _ := e.granted(req, usualToken, answer)
	e.lostOnSilence(p, c, lease, 3)
}

// giveUpAcquire: ACQUIRE is never answered: unavailable within [0.7, 1.0] ×
// lease of ACQUIRE, no heartbeat while ACQUIRE is in flight, closed by
// ACQUIRE + lease + 750 ms.
func giveUpAcquire(e *Env) {
	const lease = 2 * time.Second
	f := e.Fake()
	p := e.StartJudged(NewRequest(f.Addr(), "acquire-silence", lease))
	c, err := f.Next(safety)
	e.must("connect", err)
	acq, err := c.NextReq(safety)
	e.must("frames: ACQUIRE", err)
	ev, err := p.Next(safety + lease)
	e.must("rule 8 (give up while ACQUIRE is unanswered)", err)
	if ev.Event != "unavailable" {
		e.Failf("rule 8 (give up while ACQUIRE is unanswered)", "the driver printed %s, want unavailable", ev)
	}
	e.between("rule 8 (give up 0.8 × lease after ACQUIRE)", "the time from ACQUIRE to the failure", ev.At.Sub(acq.At), lease*giveUpEarliest/100, lease*giveUpLatest/100)
	end, _, err := c.WaitEnd(safety)
	e.must("rule 7 (close on doubt)", err)
	e.between("rule 7 (closed by ACQUIRE + lease)", "the time from ACQUIRE to the close", end.Sub(acq.At), 0, lease+closeSlack)
}

// eofWhileHolding: lease 10 s (give-up would take 8 s); the kit closes; the
// loss must be reported within 2 s, and a release afterwards is harmless and
// opens no connection.
func eofWhileHolding(e *Env) {
	const lease = 10 * time.Second
	p, c, _ := e.granted(NewRequest("", "eof", lease), usualToken, answerAll(usualToken))
	closed := time.Now()
	c.Close()
	lost := e.expect("rule 8 (end of stream is a loss)", p, "lost", safety)
	e.between("rule 8 (end of stream is a loss at once)", "the time from the close to the lost event", lost.At.Sub(closed), 0, 2*time.Second)
	e.expect("rule 8 (the work stops)", p, "work-stopped", safety)
	e.must("driver", p.Release())
	e.expect("release after loss is harmless", p, "released", safety)
	time.Sleep(200 * time.Millisecond)
	for _, f := range e.fakes {
		if n := f.Accepted(); n != 1 {
			e.Failf("rule 8 (never re-acquire silently)", "%d connections after the loss and the release, want 1", n)
		}
	}
}

// unexpectedAnswer: lease 10 s; heartbeat 1 is answered with frame (WAITING,
// or ACQUIRED with another token), which no server sends to a holder: the
// client must report the loss within 2 s and send nothing after it.
func unexpectedAnswer(frame []byte, what string) func(e *Env) {
	return func(e *Env) {
		const lease = 10 * time.Second
		rule := "rules 4, 7 (" + what + " while holding is a protocol violation: a loss at once)"
		answer := func(r Req) ([]byte, time.Duration) {
			if r.Index == 1 {
				return frame, 0
			}
			return acquired(usualToken), 0
		}
		p, c, _ := e.granted(NewRequest("", "unexpected-answer", lease), usualToken, answer)
		e.awaitRequest(c, 1, safety)
		lost, err := p.Next(2 * time.Second) // the answer goes as the request is read
		if err != nil {
			e.Failf(rule, "no lost event within 2s of the answer to heartbeat 1 (%d request(s) sent in all): %v", len(c.Log()), err)
		}
		if lost.Event != "lost" {
			e.Failf(rule, "the driver printed %s, want a lost event", lost)
		}
		e.expect("rule 8 (the work stops)", p, "work-stopped", safety)
		for _, r := range c.Log() {
			if r.At.After(lost.At) {
				e.Failf("give-up (nothing sent after the loss)", "request %d was sent after the lost event", r.Index)
			}
		}
		e.must("driver", p.Release())
		e.expect("release after loss is harmless", p, "released", safety)
	}
}

// unknownFrameWhileHolding: lease 10 s, byte 0x7e while holding, work takes
// 600 ms to stop: lost within 2 s, nothing sent after, the connection closed
// no earlier than 300 ms after the lost event and within 3 s of work-stopped.
func unknownFrameWhileHolding(e *Env) {
	const lease = 10 * time.Second
	req := NewRequest("", "unknown-frame", lease)
	req.WorkStopMS = 600
	p, c, _ := e.granted(req, usualToken, answerAll(usualToken))
	sent := time.Now()
	e.must("kit", c.Write([]byte{0x7e}))
	lost := e.expect("rule 7 (an unknown frame is a loss)", p, "lost", safety)
	e.between("rule 8 (an unknown frame is a loss at once)", "the time from the frame to the lost event", lost.At.Sub(sent), 0, 2*time.Second)
	stopped := e.expect("rule 8 (the work stops)", p, "work-stopped", safety)
	end, _, err := c.WaitEnd(safety)
	e.must("rule 7 (closed once the work stopped)", err)
	if d := end.Sub(lost.At); d < 300*time.Millisecond {
		e.Failf("give-up (closed only once the work has stopped)", "the connection closed %v after the lost event, while the work still ran", d.Round(time.Millisecond))
	}
	e.between("rule 7 (closed once the work stopped)", "the time from work-stopped to the close", end.Sub(stopped.At), -100*time.Millisecond, 3*time.Second)
	for _, r := range c.Log() {
		if r.At.After(lost.At) {
			e.Failf("give-up (nothing sent after the loss)", "request %d was sent after the lost event", r.Index)
		}
	}
	e.must("driver", p.Release())
	e.expect("release after loss is harmless", p, "released", safety)
}

// giveUpErrorAfterDeadline: lease 2 s, heartbeat 1 answered, heartbeat 2
// never. The kit stops the client's process (SIGSTOP) before the give-up is
// due (0.8 × lease after heartbeat 1's send), writes ERROR 0x02 and its FIN
// once that deadline has passed by 0.1 × lease, and lets the process go on
// (SIGCONT): the timer's deadline and the ERROR in the socket are before the
// client at once, as after any pause longer than the margin. The deadline
// comes first: the lock was lost by silence when it passed, and the ERROR
// read later only ends the connection, so the lost event carries no code. A
// client that takes the ERROR first reports code 2. One run, no second
// chance: a client that picks between its timer and its socket by chance
// (two threads, a select over both) fails about every other run, and a
// retry would let it pass. The kit stops the process about 0.55 × lease
// before the deadline; a machine too loaded for that fails the run as the
// kit's, not the client's.
func giveUpErrorAfterDeadline(e *Env) {
	const lease = 2 * time.Second
	const rule = "the order of simultaneous things (a deadline that has passed is taken before a frame read at the same time)"
	p, c, _ := e.granted(NewRequest("", "error-after-deadline", lease), usualToken, withholdFrom(2, usualToken))
	e.awaitRequest(c, 2, safety)
	answered := c.Log()[1]
	deadline := answered.At.Add(lease * 8 / 10)
	pid := p.child.Pid()
	e.must("kit: SIGSTOP the driver", syscall.Kill(pid, syscall.SIGSTOP))
	defer func() { _ = syscall.Kill(pid, syscall.SIGCONT) }()
	e.must("kit: the driver stops", poll.Until(safety, func() error { return processStopped(pid) }))
	if time.Now().After(deadline.Add(-lease / 10)) {
		e.Failf("kit", "the driver stopped only %v after heartbeat 1's send, too close to the give-up at %v to test the order", time.Since(answered.At).Round(time.Millisecond), lease*8/10)
	}
	time.Sleep(time.Until(deadline.Add(lease / 10)))
	// On loopback the bytes are in the client's receive queue when the write
	// returns: both the deadline and the ERROR wait for the client.
	e.must("kit", c.Write(errorFrame(protocol.CodeClosedByAdmin, "closed by administrator")))
	c.Close()
	e.must("kit: SIGCONT the driver", syscall.Kill(pid, syscall.SIGCONT))
	lost := e.expect(rule, p, "lost", safety)
	if lost.Code != nil {
		e.Failf(rule, "the driver printed %s: the ERROR was read %v after the give-up deadline had passed (the process was stopped across it), so the lock was lost by silence at the deadline, and the ERROR only ends the connection: lost carries no code", lost, lease/10)
	}
	e.expect("rule 8 (the work stops)", p, "work-stopped", safety)
	if _, _, err := c.WaitEnd(safety); err != nil {
		e.Failf("rule 7 (after an ERROR the client closes at once)", "%v", err)
	}
	e.must("driver", p.Release())
	e.expect("release after loss is harmless", p, "released", safety)
}

// processStopped is nil once process pid is stopped by a signal (state T
// in /proc/PID/stat).
func processStopped(pid int) error {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return poll.Abort(fmt.Errorf("read the driver's state: %w", err))
	}
	// pid (comm) state ...: comm may hold spaces and parentheses, the last
	// ") " ends it.
	i := bytes.LastIndex(stat, []byte(") "))
	if i < 0 || i+2 >= len(stat) {
		return poll.Abort(fmt.Errorf("/proc/%d/stat is %q, not pid (comm) state", pid, stat))
	}
	if state := stat[i+2]; state != 'T' {
		return fmt.Errorf("the driver (pid %d) is in state %c, not stopped", pid, state)
	}
	return nil
}
