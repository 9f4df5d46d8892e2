package eventloop

import (
	"time"

	"github.com/monolock/monolock/locktable"
)

// A turn is one entry into the owner: a socket's traffic or close, a tick, a
// call from another goroutine, a TLS handshake's result. It reads the clock
// once, at its start (begin), and every rule in it sees that one instant.
// The rules change the owner's state and record what must happen outside
// it — bytes for a session, a session to close — as effects; end applies
// them when the rules are done, as Redis flushes its clients' pending
// replies before it sleeps. Nothing the rules do re-enters the owner: a
// write that fails, or a close, makes gnet call OnClose at once, and that
// close is queued (later) and becomes the next turn.
//
// The rules reach the world only through send, wrote and closeSession;
// applying runs one way, from the effects to the connections. Two named
// steps of the turn are the exceptions, each in this file:
//
//   - flush applies the effects recorded so far before the turn ends. Only
//     traffic calls it, when a pipelining client's replies reach
//     replyBatch, so that a burst costs one write(2) per batch and the
//     backlog check sees what the peer has not taken.
//   - noteOutput is the write effect's one consequence: output the peer has
//     not taken starts the session's io-timeout clock and arms its timer.
//     It reads the connection, never the rules' state, and decides nothing
//     but that clock.

type effectKind uint8

const (
	effectWrite effectKind = iota // write out[from:to] to s
	effectClose                   // close s (close_notify first for TLS)
)

type effect struct {
	s        *session
	kind     effectKind
	from, to int
}

// begin starts a turn: the one read of the clock. The wall clock serves
// tokens and what people read; the monotonic offset every duration. Offsets
// start at one tick so that zero can mean "not set". A node of a cluster
// led through etcd takes its leader's deadline here, first (ha.go).
func (o *owner) begin() {
	wall, mono := o.clk.Now()
	o.wall, o.now = wall, mono-o.mono0+wheelTick
	o.inTurn = true
	if o.ha.leading { // before any frame is read or any grant made (ha.go)
		o.haCheck()
	}
}

// send queues frame for s. frame may be the owner's scratch buffer: it is
// copied. Consecutive frames to one session become one write.
func (o *owner) send(s *session, frame []byte) {
	from := len(o.outbuf)
	o.outbuf = append(o.outbuf, frame...)
	o.wrote(s, from)
}

// wrote records the bytes appended to the turn's output since from as a
// write to s.
func (o *owner) wrote(s *session, from int) {
	if n := len(o.effects); n > 0 {
		if e := &o.effects[n-1]; e.kind == effectWrite && e.s == s && e.to == from {
			e.to = len(o.outbuf)
			return
		}
	}
	o.effects = append(o.effects, effect{s: s, kind: effectWrite, from: from, to: len(o.outbuf)})
}

// closeSession decides that s ends, for reason: it takes no more input, and
// is closed once the turn's writes to it are out. why, if any, is logged.
func (o *owner) closeSession(s *session, reason locktable.ReleaseReason, why string) {
	if s.closing || s.closed {
		return
	}
	if why != "" {
		if e := o.log.Debug(); e.Enabled() {
			e.Str("remote", s.remoteAddr()).Str("lock", s.claim.Name()).Stringer("reason", reason).Msg(why)
		}
	}
	s.closing, s.closeReason = true, reason
	o.effects = append(o.effects, effect{s: s, kind: effectClose})
}

// flush applies the effects recorded so far in the middle of a turn (see
// above). The session whose turn it is may be closed when it returns: a
// write failed.
func (o *owner) flush() { o.apply(nil) }

// end applies the turn's effects, then runs the turns its closes caused,
// and plans the next tick. self is the session whose OnTraffic this is, or
// nil: gnet closes that one when the callback returns Close, which end
// reports instead of closing it.
func (o *owner) end(self *session) (closeSelf bool) {
	closeSelf = o.apply(self)
	for i := 0; i < len(o.later); i++ { // a turn's closes may cause more
		s := o.later[i]
		o.later[i] = nil
		o.begin()
		o.forget(s)
		o.apply(self)
	}
	o.later = o.later[:0]
	o.inTurn = false
	o.plan()
	return closeSelf && !self.closed
}

// apply performs the effects recorded so far, in order. A write that fails
// and a close make gnet run OnClose, which queues the session for a turn of
// its own (see closed).
func (o *owner) apply(self *session) (closeSelf bool) {
	for i := 0; i < len(o.effects); i++ {
		e := o.effects[i]
		s := e.s
		if s.closed {
			continue
		}
		switch e.kind {
		case effectWrite:
			s.unchecked += uint32(e.to - e.from)
			_, _ = s.conn.Write(o.outbuf[e.from:e.to])
			if !s.closed {
				o.noteOutput(s)
			}
		case effectClose:
			s.sec().closeNotify()
			if s == self {
				closeSelf = true
			} else {
				_ = closeConn(s.conn)
			}
		}
	}
	clear(o.effects) // keep no closed session alive
	o.effects = o.effects[:0]
	o.outbuf = o.outbuf[:0]
	return closeSelf
}

// noteOutput starts the io-timeout clock for output the peer has not drained:
// in gnet's buffer, or in the kernel's send queue, looked at every
// outputCheck bytes written (see outq.go). Once started, the clock is the
// timer's to stop (onTimer), which looks at both every stallPoll.
func (o *owner) noteOutput(s *session) {
	if s.stalledSince != 0 {
		return
	}
	pending := s.conn.OutboundBuffered()
	if pending == 0 && s.unchecked >= outputCheck {
		pending, _ = s.lookAtKernel()
	}
	if pending > 0 {
		s.stalledSince = o.now
		o.armBy(s, o.now+stallPoll)
	}
}

// closed is gnet's OnClose for a session: its connection is gone. Inside a
// turn (a write failed, or the turn closed it) the rules wait for the next
// turn; otherwise this is a turn of its own. Either way what needs the
// connection is done now (ended): gnet forgets its address when OnClose
// returns.
func (o *owner) closed(s *session) {
	if s.closed {
		return
	}
	s.closed = true
	s.conn.SetContext(nil)
	if o.inTurn {
		o.ended(s)
		o.later = append(o.later, s)
		return
	}
	o.begin()
	o.ended(s)
	o.forget(s)
	o.end(nil)
}

// plan tells the ticker when the next timer may be due: after a tick, the
// wheel's earliest deadline; otherwise only when the turn armed one earlier
// than planned.
func (o *owner) plan() {
	switch {
	case o.ticked:
		o.ticked, o.armed = false, 0
		at, ok := o.wheel.NextDue()
		if due, haDue := o.haNextDue(); haDue && (!ok || due < at) {
			at, ok = due, true
		}
		o.wakeup.set(at, o.now, ok)
	case o.armed != 0:
		if planned, ok := o.wakeup.planned(); !ok || o.armed < planned {
			o.wakeup.set(o.armed, o.now, true)
		}
		o.armed = 0
	}
}

// armedAt notes a deadline armed this turn, for plan.
func (o *owner) armedAt(at time.Duration) {
	if o.armed == 0 || at < o.armed {
		o.armed = at
	}
}
