package eventloop

import (
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/rs/zerolog"

	"github.com/monolock/monolock/eventloop/audit"
	"github.com/monolock/monolock/eventloop/metrics"
	"github.com/monolock/monolock/eventloop/timerwheel"
	"github.com/monolock/monolock/locktable"
	"github.com/monolock/monolock/protocol"
)

// Limits on what the server buffers for one peer. A client may pipeline
// heartbeats without reading replies; once outboundLimit bytes of replies wait
// in user space the server stops parsing that client's input, and once
// inboundLimit bytes of unparsed input pile up behind that, the peer is
// plainly not draining and is closed. Together with io-timeout they bound the
// memory a stuck or hostile peer can make the server hold.
const (
	outboundLimit = 16 << 10
	inboundLimit  = 64 << 10
	replyBatch    = 8 << 10 // answers collected before a write, well below outboundLimit

	// bytesPerTurn bounds the input parsed for one session before the loop
	// serves the others; the rest waits for the session's next turn. It
	// matches gnet's largest read, so a pipelining client that reads its
	// replies is never left behind (a turn of 64 Ki heartbeats takes a few
	// milliseconds), while one that does not read is closed by the limits
	// above.
	bytesPerTurn = 64 << 10
	// maxUnparsed closes a session whose unparsed input still grows although
	// its output drains: it sends faster than the server can parse.
	maxUnparsed = 4 * inboundLimit
)

// Timer wheel geometry: 1 ms ticks keep lease expiry within a few ms of the
// deadline; 4096 slots cover about four seconds per turn.
const (
	wheelTick  = time.Millisecond
	wheelSlots = 4096
	// stallPoll is how often a session with undrained output is looked at:
	// gnet reports no "drained" event, so the owner polls the few stuck ones.
	stallPoll = 10 * time.Millisecond
)

// owner is the state that only the event-loop goroutine touches: the lock
// table, the timer wheel and every session. Its methods run on that goroutine.
type owner struct {
	log       zerolog.Logger
	ioTimeout time.Duration
	start     time.Time // the zero of the monotonic clock below

	table    *locktable.Table
	wheel    *timerwheel.Wheel[*session]
	sessions sessionList
	fire     func(*timerwheel.Timer[*session])

	metrics    *metrics.Metrics
	audit      *audit.Recorder // nil when the audit log is off
	authorizer Authorizer      // nil when no ACL is configured

	frame protocol.Frame             // decoded in place, reused for every frame
	out   [protocol.MaxErrorLen]byte // encoded in place, reused for every reply

	// replies collects the answers to one batch of a session's input, so that
	// a client pipelining many frames costs one write(2) per batch, not one
	// per frame: a heartbeat flood must not monopolize the loop.
	replies  []byte
	replying *session

	// grants holds promoted sessions whose ACQUIRED is not yet written. A
	// failing write closes a session, which may promote the next one; queueing
	// instead of recursing keeps that chain flat.
	grants   []*session
	granting bool

	wakeup  wakeup // when the ticker should next hand the owner a tick
	ticking bool   // inside advance, which plans the next wake-up itself

	shuttingDown bool
}

func newOwner(cfg Config) *owner {
	o := &owner{
		log:        cfg.Logger,
		ioTimeout:  cfg.IOTimeout,
		start:      time.Now(),
		table:      locktable.New(),
		wheel:      timerwheel.New[*session](wheelTick, wheelSlots),
		metrics:    cfg.Metrics,
		authorizer: cfg.Authorizer,
	}
	if cfg.Audit != nil {
		o.audit = audit.NewRecorder(cfg.Audit)
	}
	o.fire = o.onTimer
	o.wakeup.init()
	return o
}

// clock returns the wall clock (for tokens) and the monotonic offset since the
// owner started (for every duration). Offsets start at one tick so that zero
// can mean "not set".
func (o *owner) clock() (time.Time, time.Duration) {
	wall := time.Now()
	return wall, wall.Sub(o.start) + wheelTick
}

// now is the monotonic offset without the wall clock; the ticker goroutine
// uses it too (start never changes).
func (o *owner) now() time.Duration { return time.Since(o.start) + wheelTick }

// wallAt converts a monotonic offset back to wall-clock time for people.
func (o *owner) wallAt(d time.Duration) time.Time { return o.start.Add(d - wheelTick) }

// open registers a new connection; p describes the client of a TLS bridge.
func (o *owner) open(c gnet.Conn, p *peer) {
	_, now := o.clock()
	s := &session{conn: c, since: now, peer: p}
	s.claim.Value = s
	s.timer.Value = s
	c.SetContext(s)
	o.sessions.add(s)
	o.schedule(s, now+o.ioTimeout)
	o.metrics.Opened()
}

// traffic parses and answers every complete frame buffered for s.
func (o *owner) traffic(s *session) gnet.Action {
	c := s.conn
	wall, now := o.clock()
	buf, _ := c.Peek(-1)
	used := 0
	s.backlogged = false
	o.replying = s
	for used < len(buf) {
		if used >= bytesPerTurn {
			_ = c.Wake(nil) // another turn, after the sessions already waiting
			break
		}
		if len(o.replies) >= replyBatch {
			o.flushReplies(s)
		}
		if c.OutboundBuffered() >= outboundLimit {
			s.backlogged = true
			break
		}
		n, err := protocol.DecodeClient(buf[used:], &o.frame)
		if err != nil {
			o.reject(s, err)
			break
		}
		if n == 0 {
			break
		}
		used += n
		o.handle(s, &o.frame, wall, now)
		if s.closed || s.closing {
			break
		}
	}
	o.flushReplies(s)
	o.replying = nil
	if s.closed { // a failed write closed it under us; gnet has released c
		return gnet.None
	}
	if s.closing {
		return gnet.Close
	}
	if used > 0 { // gnet's Discard(0) discards everything, the partial frame too
		_, _ = c.Discard(used)
	}
	switch rest := len(buf) - used; {
	case rest == 0:
		s.partialSince = 0
	case s.backlogged && rest > inboundLimit, rest > maxUnparsed:
		o.log.Debug().Str("remote", s.remoteAddr()).Msg("closing a peer that sends faster than it reads its replies")
		s.closing, s.closeReason = true, metrics.ReleaseIOTimeout
		return gnet.Close
	case !s.backlogged && (used > 0 || s.partialSince == 0):
		s.partialSince = now
		o.armBy(s, now+o.ioTimeout)
	}
	o.noteOutput(s, now)
	return gnet.None
}

// handle applies one well-formed frame to the session.
func (o *owner) handle(s *session, f *protocol.Frame, wall time.Time, now time.Duration) {
	switch f.Type {
	case protocol.TypeHeartbeat:
		if !s.registered() {
			o.rejectWith(s, protocol.ErrFirstMessageNotAcquire, "first message must be ACQUIRE: got HEARTBEAT; send ACQUIRE once, then heartbeats")
			return
		}
		s.lastSeen = now
		o.metrics.Heartbeat()
		o.sendState(s)
	case protocol.TypeAcquire:
		if s.registered() {
			o.rejectWith(s, protocol.ErrDuplicateAcquire, "duplicate ACQUIRE: this connection already claimed lock "+quote(s.claim.Name())+"; open a new connection for another claim")
			return
		}
		if o.authorizer != nil && !o.authorizer.Allowed(s.identity(), string(f.Name)) {
			o.deny(s, string(f.Name), wall)
			return
		}
		s.leaseMS = f.LeaseMS
		s.lastSeen, s.since = now, now
		o.metrics.Acquire()
		if o.table.AcquireBytes(&s.claim, f.Name, wall) {
			o.granted(s, wall, now)
		} else {
			o.metrics.Queued()
		}
		o.armBy(s, now+s.lease()+1)
		o.sendState(s)
	}
}

// sendState answers ACQUIRE and HEARTBEAT with the session's state.
func (o *owner) sendState(s *session) {
	if s.claim.State() == locktable.Holding {
		o.send(s, protocol.AppendAcquired(o.out[:0], s.claim.Token()))
	} else {
		o.send(s, protocol.AppendWaiting(o.out[:0]))
	}
}

// send writes one frame. gnet copies what the socket does not take at once,
// so the reused buffer is free again on return. A write that fails closes the
// connection inside gnet, which runs onClose before send returns.
func (o *owner) send(s *session, frame []byte) {
	if s == o.replying {
		o.replies = append(o.replies, frame...)
		return
	}
	_, _ = s.conn.Write(frame)
}

// flushReplies writes the collected answers of the session being parsed.
func (o *owner) flushReplies(s *session) {
	if len(o.replies) > 0 && !s.closed {
		_, _ = s.conn.Write(o.replies)
	}
	o.replies = o.replies[:0]
}

// noteOutput starts the io-timeout clock for output the peer has not drained.
// The clock stops only when the output is empty again: replies are a few
// bytes each, so a peer that keeps some waiting for a whole io-timeout is
// not keeping up, however slowly it reads.
func (o *owner) noteOutput(s *session, now time.Duration) {
	pending := s.conn.OutboundBuffered()
	if pending == 0 {
		s.stalledSince = 0
		return
	}
	if s.stalledSince == 0 {
		s.stalledSince = now
		o.armBy(s, now+stallPoll)
	}
}

// armBy makes sure the session's timer fires no later than at.
func (o *owner) armBy(s *session, at time.Duration) {
	if d, ok := o.wheel.Deadline(&s.timer); !ok || at < d {
		o.schedule(s, at)
	}
}

// schedule arms the session's timer for at, and wakes the ticker if that is
// earlier than it planned.
func (o *owner) schedule(s *session, at time.Duration) {
	o.wheel.Schedule(&s.timer, at)
	if planned, ok := o.wakeup.planned(); !o.ticking && (!ok || at < planned) {
		o.wakeup.set(at, true)
	}
}

// advance runs the timer wheel up to the present and plans the next tick.
func (o *owner) advance() {
	o.ticking = true
	_, now := o.clock()
	o.wheel.Advance(now, o.fire)
	o.ticking = false
	o.wakeup.set(o.wheel.NextDue())
}

// onTimer checks every deadline of one session. Heartbeats never touch the
// wheel: they move lastSeen, and this re-arms the timer for the remainder.
func (o *owner) onTimer(t *timerwheel.Timer[*session]) {
	s := t.Value
	if s.closed {
		return
	}
	_, now := o.clock()
	switch {
	case !s.registered() && now-s.since >= o.ioTimeout:
		o.closeNow(s, metrics.ReleaseIOTimeout, "no complete ACQUIRE within io-timeout")
		return
	case s.partialSince != 0 && now-s.partialSince >= o.ioTimeout:
		o.closeNow(s, metrics.ReleaseIOTimeout, "frame left half-sent for io-timeout")
		return
	case s.registered() && now-s.lastSeen > s.lease():
		o.closeNow(s, metrics.ReleaseExpired, "lease expired without a heartbeat")
		return
	}
	if s.stalledSince != 0 {
		pending := s.conn.OutboundBuffered()
		switch {
		case pending == 0:
			s.stalledSince = 0
			if s.backlogged { // the peer reads again: parse what it sent meanwhile
				if o.traffic(s) == gnet.Close {
					o.closeNow(s, s.closeReason, "")
				}
				if s.closed {
					return
				}
			}
		case now-s.stalledSince >= o.ioTimeout:
			o.closeNow(s, metrics.ReleaseIOTimeout, "output not drained for io-timeout")
			return
		}
	}
	o.rearm(s, now)
}

// rearm schedules the session's timer at its earliest pending deadline.
func (o *owner) rearm(s *session, now time.Duration) {
	at := s.since + o.ioTimeout
	if s.registered() {
		at = s.lastSeen + s.lease() + 1 // expiry is strictly after the lease
	}
	if s.partialSince != 0 {
		at = min(at, s.partialSince+o.ioTimeout)
	}
	if s.stalledSince != 0 {
		at = min(at, now+stallPoll)
	}
	o.schedule(s, at)
}

// closeNow closes a session from the owner's side, outside OnTraffic. gnet
// runs onClose before it returns.
func (o *owner) closeNow(s *session, reason metrics.ReleaseReason, why string) {
	if why != "" {
		o.log.Debug().Str("remote", s.remoteAddr()).Str("lock", s.claim.Name()).Stringer("reason", reason).Msg(why)
	}
	s.closing, s.closeReason = true, reason
	_ = s.conn.EventLoop().Close(s.conn)
}

// onClose forgets a closed session and hands its lock on at once.
func (o *owner) onClose(s *session) {
	s.closed = true
	s.conn.SetContext(nil)
	o.wheel.Stop(&s.timer)
	o.sessions.remove(s)
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
	g := next.Value.(*session)
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
				_, now := o.clock()
				o.noteOutput(g, now)
			}
		}
	}
	o.grants = o.grants[:0]
	o.granting = false
}

const shuttingDownReason = "server shutting down: reconnect, the lock service will be back"

// shutdown sends ERROR 0x01 to every session and closes it, promoting no one.
func (o *owner) shutdown() {
	o.shuttingDown = true
	for s := o.sessions.head; s != nil; {
		next := s.next
		s.closing, s.closeReason = true, metrics.ReleaseShutdown // also if the write fails
		o.send(s, protocol.AppendError(o.out[:0], protocol.CodeShuttingDown, shuttingDownReason))
		if !s.closed {
			o.closeNow(s, metrics.ReleaseShutdown, "")
		}
		s = next
	}
}
