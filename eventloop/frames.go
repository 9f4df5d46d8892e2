package eventloop

import (
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/monolock/monolock/locktable"
	"github.com/monolock/monolock/protocol"
)

// traffic parses and answers every complete frame buffered for s, within the
// per-turn and backlog limits.
func (o *owner) traffic(s *session) gnet.Action {
	c := s.conn
	buf, end := c.Peek(-1) // end: a TLS stream ended after buf
	if s.closed {          // a TLS session's transport failed while decrypting
		return gnet.None
	}
	wall, now := o.clock()
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
	if end != nil { // the client's close_notify, or TLS input crypto/tls refused
		s.closing = true
		if !isEOF(end) {
			s.closeReason = ReleaseProtocolError
		}
		return gnet.Close
	}
	if used > 0 { // gnet's Discard(0) discards everything, the partial frame too
		_, _ = c.Discard(used)
	}
	rest := len(buf) - used
	half := rest > 0 // a frame, or for TLS a record or handshake message, is half-sent
	if tc, ok := c.(*tlsConn); ok && !half {
		half = tc.halfRecord()
	}
	switch {
	case !half:
		s.partialSince = 0
	case s.backlogged && rest > inboundLimit, rest > maxUnparsed:
		if e := o.log.Debug(); e.Enabled() {
			e.Str("remote", s.remoteAddr()).Msg("closing a peer that sends faster than it reads its replies")
		}
		s.closing, s.closeReason = true, ReleaseIOTimeout
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
		o.sessions.acquired(s)
		s.lastSeen, s.since = now, now
		if o.table.AcquireBytes(&s.claim, f.Name, wall) {
			o.granted(s, wall, now)
		} else {
			o.metrics.Queued()
		}
		o.armBy(s, s.expiresAt())
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
	s.unchecked += uint32(len(frame))
	_, _ = s.conn.Write(frame)
}

// sendError writes ERROR(code, reason) and counts it: every ERROR the server
// sends is a protocol error in the metrics, whoever decided it.
func (o *owner) sendError(s *session, code protocol.Code, reason string) {
	o.metrics.ProtocolError(code)
	o.send(s, protocol.AppendError(o.out[:0], code, reason))
}

// flushReplies writes the collected answers of the session being parsed.
func (o *owner) flushReplies(s *session) {
	if len(o.replies) > 0 && !s.closed {
		s.unchecked += uint32(len(o.replies))
		_, _ = s.conn.Write(o.replies)
	}
	o.replies = o.replies[:0]
}

// noteOutput starts the io-timeout clock for output the peer has not drained:
// in gnet's buffer, or in the kernel's send queue, looked at every
// outputCheck bytes written (see outq.go). Once started, the clock is the
// timer's to stop (onTimer), which looks at both every stallPoll.
func (o *owner) noteOutput(s *session, now time.Duration) {
	if s.stalledSince != 0 {
		return
	}
	pending := s.conn.OutboundBuffered()
	if pending == 0 && s.unchecked >= outputCheck {
		pending, _ = s.lookAtKernel()
	}
	if pending > 0 {
		s.stalledSince = now
		o.armBy(s, now+stallPoll)
	}
}
