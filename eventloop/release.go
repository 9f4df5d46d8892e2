package eventloop

import (
	"github.com/monolock/monolock/locktable"
)

// Every way a session ends — the client closes, a protocol error, lease
// expiry, io-timeout, force-release, kick, shutdown — ends in onClose, and
// onClose is the only place a waiter is promoted.

// closeNow closes a session from the owner's side, outside OnTraffic; onClose
// has run when it returns.
func (o *owner) closeNow(s *session, reason ReleaseReason, why string) {
	if why != "" {
		if e := o.log.Debug(); e.Enabled() {
			e.Str("remote", s.remoteAddr()).Str("lock", s.claim.Name()).Stringer("reason", reason).Msg(why)
		}
	}
	s.closing, s.closeReason = true, reason
	_ = closeConn(s.conn)
}

// onClose forgets a closed session and hands its lock on at once.
func (o *owner) onClose(s *session) {
	s.closed = true
	s.conn.SetContext(nil)
	o.wheel.Stop(&s.timer)
	o.sessions.remove(s, s.registered())
	o.metrics.Closed()
	wall, now := o.clock()
	switch s.claim.State() {
	case locktable.Holding:
		o.released(s, wall, now)
	case locktable.Waiting:
		o.metrics.Dequeued()
	}
	if o.shuttingDown {
		return // no promotion, ever, while shutting down
	}
	next := o.table.Release(&s.claim, wall)
	if next == nil {
		return
	}
	g := next.Value
	o.metrics.Dequeued()
	o.granted(g, wall, now)
	o.push(g)
}

// push sends ACQUIRED to a promoted session.
func (o *owner) push(g *session) {
	o.grants = append(o.grants, g)
	if o.granting {
		return
	}
	o.granting = true
	for i := 0; i < len(o.grants); i++ {
		g := o.grants[i]
		o.grants[i] = nil
		if !g.closed {
			o.sendState(g)
			if !g.closed {
				o.noteOutput(g, o.now())
			}
		}
	}
	o.grants = o.grants[:0]
	o.granting = false
}
