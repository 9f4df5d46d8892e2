package eventloop

import (
	"github.com/monolock/monolock/locktable"
	"github.com/monolock/monolock/protocol"
)

// traffic parses and answers every complete frame buffered for s, within the
// per-turn and backlog limits.
func (o *owner) traffic(s *session) {
	c := s.conn
	buf, end := c.Peek(-1) // end: a TLS stream ended after buf
	if s.closed {          // a TLS session's transport failed while decrypting
		return
	}
	used := 0
	s.backlogged = false
	for used < len(buf) {
		if used >= bytesPerTurn {
			_ = c.Wake(nil) // another turn, after the sessions already waiting
			break
		}
		if len(o.outbuf) >= replyBatch {
			// A client pipelining many frames costs one write(2) per batch,
			// and the backlog below sees what the peer has not taken.
			o.apply(nil)
		}
		if s.closed {
			return
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
		o.handle(s, &o.frame)
		if s.closing {
			break
		}
	}
	if s.closing {
		return
	}
	if end != nil { // the client's close_notify, or TLS input crypto/tls refused
		reason := ReleaseGraceful
		if !isEOF(end) {
			reason = ReleaseProtocolError
		}
		o.closeSession(s, reason, "")
		return
	}
	if used > 0 { // gnet's Discard(0) discards everything, the partial frame too
		_, _ = c.Discard(used)
	}
	rest := len(buf) - used
	half := rest > 0 || s.sec().halfRecord() // a frame, or for TLS a record or handshake message, is half-sent
	switch {
	case !half:
		s.partialSince = 0
	case s.backlogged && rest > inboundLimit, rest > maxUnparsed:
		o.closeSession(s, ReleaseIOTimeout, "closing a peer that sends faster than it reads its replies")
	case !s.backlogged && (used > 0 || s.partialSince == 0):
		s.partialSince = o.now
		o.armBy(s, o.now+o.ioTimeout)
	}
	if n := len(o.effects); n == 0 || o.effects[n-1].s != s {
		o.noteOutput(s) // output left from earlier turns; this turn's is noted as it is written
	}
}

// handle applies one well-formed frame to the session.
func (o *owner) handle(s *session, f *protocol.Frame) {
	switch f.Type {
	case protocol.TypeHeartbeat:
		if !s.registered() {
			o.rejectWith(s, protocol.ErrFirstMessageNotAcquire, "first message must be ACQUIRE: got HEARTBEAT; send ACQUIRE once, then heartbeats")
			return
		}
		s.lastSeen = o.now
		o.metrics.Heartbeat()
		o.sendState(s)
	case protocol.TypeAcquire:
		if s.registered() {
			o.rejectWith(s, protocol.ErrDuplicateAcquire, "duplicate ACQUIRE: this connection already claimed lock "+quote(s.claim.Name())+"; open a new connection for another claim")
			return
		}
		if o.authorizer != nil && !o.authorizer.Allowed(s.sec().identity(), string(f.Name)) {
			o.deny(s, string(f.Name))
			return
		}
		s.leaseMS = f.LeaseMS
		o.sessions.acquired(s)
		s.lastSeen, s.since = o.now, o.now
		if o.table.AcquireBytes(&s.claim, f.Name, o.wall) {
			o.granted(s)
		} else {
			o.metrics.Queued()
		}
		o.armBy(s, s.expiresAt())
		o.sendState(s)
	}
}

// sendState answers ACQUIRE and HEARTBEAT with the session's state.
func (o *owner) sendState(s *session) {
	from := len(o.outbuf)
	if s.claim.State() == locktable.Holding {
		o.outbuf = protocol.AppendAcquired(o.outbuf, s.claim.Token())
	} else {
		o.outbuf = protocol.AppendWaiting(o.outbuf)
	}
	o.wrote(s, from)
}

// sendError writes ERROR(code, reason) and counts it: every ERROR the server
// sends is a protocol error in the metrics, whoever decided it.
func (o *owner) sendError(s *session, code protocol.Code, reason string) {
	o.metrics.ProtocolError(code)
	o.send(s, protocol.AppendError(o.out[:0], code, reason))
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
