package eventloop

import (
	"time"

	"github.com/monolock/monolock/eventloop/timerwheel"
	"github.com/monolock/monolock/locktable"
)

// One timer per session covers every deadline it has: the io-timeout before
// its ACQUIRE, a half-sent frame, output the peer does not drain, and its
// lease. Heartbeats never touch the wheel: they move lastSeen, and the timer,
// when it fires, re-arms itself for whatever is left.

// armBy makes sure the session's timer fires no later than at.
func (o *owner) armBy(s *session, at time.Duration) {
	if d, ok := o.wheel.Deadline(&s.timer); !ok || at < d {
		o.schedule(s, at)
	}
}

// schedule arms the session's timer for at; the turn's end wakes the
// ticker if that is earlier than it planned.
func (o *owner) schedule(s *session, at time.Duration) {
	o.wheel.Schedule(&s.timer, at)
	o.armedAt(at)
}

// firesPerTick bounds the timers one tick runs. A mass expiry (thousands of
// connections accepted at once that never send their ACQUIRE) closes a
// socket per timer, some microseconds each; past the bound the rest wait for
// the next tick, a wheel tick later, and the loop serves its sockets in
// between. Deadlines are never early, and late by at most a tick per
// firesPerTick timers due at once.
const firesPerTick = 128

// fireBounded runs a due timer, or defers it to the next tick once this
// tick has run firesPerTick.
func (o *owner) fireBounded(t *timerwheel.Timer[*session]) {
	if o.fired >= firesPerTick {
		o.wheel.Schedule(t, 0) // a deadline reached: the next Advance
		return
	}
	o.fired++
	o.onTimer(t)
}

// tick is the turn that runs the timer wheel up to now.
func (o *owner) tick() {
	o.begin()
	o.advance()
	o.end(nil)
}

// advance runs the timer wheel up to the turn's now; the turn's end plans
// the next tick.
func (o *owner) advance() {
	o.fired = 0
	o.ticked = true
	o.wheel.Advance(o.now, o.fire)
}

// onTimer checks every deadline of one session.
func (o *owner) onTimer(t *timerwheel.Timer[*session]) {
	s := t.Value
	if s.closed || s.closing {
		return
	}
	now := o.now
	excused, serverTurn := o.serverTurns(s)
	switch {
	case !s.registered() && !serverTurn && now-s.since-excused >= o.ioTimeout:
		o.closeSession(s, locktable.ReleaseIOTimeout, "no complete ACQUIRE within io-timeout")
		return
	case s.partialSince != 0 && now-s.partialSince >= o.ioTimeout:
		o.closeSession(s, locktable.ReleaseIOTimeout, "frame left half-sent for io-timeout")
		return
	case s.registered() && now >= s.expiresAt():
		o.closeSession(s, locktable.ReleaseExpired, "lease expired without a heartbeat")
		return
	}
	if s.stalledSince != 0 {
		// gnet's buffer stops the clock only once empty: replies are a few
		// bytes each, so a peer that keeps some waiting there for a whole
		// io-timeout is not keeping up, however slowly it reads. What the
		// kernel holds (at most its send buffer) is in flight as long as
		// the peer acknowledges some of it.
		pending := s.conn.OutboundBuffered()
		if pending == 0 {
			var progressed bool
			if pending, progressed = s.lookAtKernel(); pending > 0 && progressed {
				s.stalledSince = now
			}
		}
		switch {
		case pending == 0:
			s.stalledSince = 0
			if s.backlogged { // the peer reads again: parse what it sent meanwhile
				o.traffic(s)
				if s.closed || s.closing {
					return
				}
			}
		case now-s.stalledSince >= o.ioTimeout:
			o.closeSession(s, locktable.ReleaseIOTimeout, "output not drained for io-timeout")
			return
		}
	}
	o.rearm(s, now)
}

// serverTurns is how much of a TLS session's handshake so far was the
// server's turn (a compute slot awaited, then the computation), which the
// ACQUIRE's io-timeout leaves out, and whether it is the server's turn now.
// What is left out is capped at maxExcused, so that a client cannot hold a
// connection for long by making the server take many turns.
func (o *owner) serverTurns(s *session) (excused time.Duration, serverTurn bool) {
	ended, turn := s.sec().serverTurns()
	return o.excusable(ended), turn && ended < maxExcused*o.ioTimeout
}

// excusable is how much of ended, the server's turns in a handshake, the
// ACQUIRE's io-timeout leaves out.
func (o *owner) excusable(ended time.Duration) time.Duration {
	return min(ended, maxExcused*o.ioTimeout)
}

// maxExcused caps the server's turns that io-timeout leaves out of a
// handshake, in io-timeouts: a fleet of thousands of mutual-TLS clients
// reconnecting at once is admitted within a few seconds on two cores.
const maxExcused = 4

// rearm schedules the session's timer at its earliest pending deadline.
func (o *owner) rearm(s *session, now time.Duration) {
	excused, serverTurn := o.serverTurns(s)
	at := s.since + excused + o.ioTimeout
	if serverTurn {
		at = max(at, now+o.ioTimeout) // looked at again once the client may be at fault
	}
	if s.registered() {
		at = s.expiresAt()
	}
	if s.partialSince != 0 {
		at = min(at, s.partialSince+o.ioTimeout)
	}
	if s.stalledSince != 0 {
		at = min(at, now+stallPoll)
	}
	o.schedule(s, at)
}

// closeBy makes an unregistered session's io-timeout end at at, if that is
// sooner: a refused TLS client gets a moment to read the alert, not more.
func (o *owner) closeBy(s *session, at time.Duration) {
	if at < s.since+o.ioTimeout {
		s.since = at - o.ioTimeout
	}
	o.armBy(s, at)
}
