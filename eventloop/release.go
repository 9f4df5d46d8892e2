package eventloop

import (
	"github.com/monolock/monolock/locktable"
)

// Every way a session ends — the client closes, a protocol error, lease
// expiry, io-timeout, force-release, kick, shutdown, eviction — ends in
// gnet's OnClose, and the turn after it runs forget, the only place a waiter
// is promoted.

// forget removes a closed session and hands its lock on at once. It is the
// turn that follows gnet's OnClose (see owner.closed).
func (o *owner) forget(s *session) {
	o.wheel.Stop(&s.timer)
	o.sessions.remove(s, s.registered())
	o.metrics.Closed()
	switch s.claim.State() {
	case locktable.Holding:
		o.released(s)
	case locktable.Waiting:
		o.metrics.Dequeued()
	}
	if o.shuttingDown {
		return // no promotion, ever, while shutting down
	}
	next := o.table.Release(&s.claim, o.wall)
	if next == nil {
		return
	}
	g := next.Value
	o.metrics.Dequeued()
	o.granted(g)
	o.sendState(g)
}
