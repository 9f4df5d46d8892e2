package eventloop

import (
	"errors"
	"fmt"
	"strconv"

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
			o.flush() // a batch of replies (turn.go)
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
		reason := locktable.ReleaseGraceful
		if !isEOF(end) {
			reason = locktable.ReleaseProtocolError
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
		o.closeSession(s, locktable.ReleaseIOTimeout, "closing a peer that sends faster than it reads its replies")
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
		if s.claim.State() != locktable.Holding { // Waiting, or Pending (ha.go)
			o.sessions.heard(s)
		}
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
		if o.ha.on {
			o.haAcquired(f.LeaseMS) // a longer lease than etcd stores: ask for it now
		}
		s.lastSeen, s.since = o.now, o.now
		granted := o.table.AcquireBytes(&s.claim, f.Name, o.wall)
		o.sessions.acquired(s, granted)
		if granted {
			o.granted(s)
		} else {
			o.metrics.Queued()
		}
		o.armBy(s, s.expiresAt())
		if s.claim.State() != locktable.Pending {
			o.sendState(s)
		} // else the lock is free and its grant waits for etcd (ha.go): ACQUIRED is the answer, once it comes
	case protocol.TypeRelease:
		if !s.registered() {
			o.rejectWith(s, protocol.ErrFirstMessageNotAcquire, "first message must be ACQUIRE: got RELEASE; send ACQUIRE once, then heartbeats, then RELEASE")
			return
		}
		// The session ends as a close would: a holder's lock passes on in
		// the turn after this one (forget), a waiter leaves its queue. The
		// server answers nothing, reads nothing more and closes first, so
		// the TIME_WAIT lands on its own fixed port, not on one of the
		// client's ephemeral ones.
		o.closeSession(s, locktable.ReleaseFrame, "")
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

// reject answers a frame the decoder refused with its ERROR and marks the
// session for closing. The reason names what was wrong and what to do; it is
// built only on this error path.
func (o *owner) reject(s *session, err error) {
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		pe = protocol.ErrUnknownMessageType
	}
	f := &o.frame
	var reason string
	switch pe {
	case protocol.ErrUnknownMessageType:
		reason = fmt.Sprintf("unknown message type: 0x%02x; a client sends only ACQUIRE (0x01), HEARTBEAT (0x02) and RELEASE (0x03)", uint8(f.Type))
	case protocol.ErrUnsupportedVersion:
		reason = fmt.Sprintf("unsupported protocol version: got %d, this server speaks %d", f.Version, protocol.Version)
	case protocol.ErrInvalidLease:
		reason = "lease must be positive: lease_ms is 0; choose the failure-detection time in milliseconds"
	case protocol.ErrEmptyName:
		reason = "empty lock name: name_len is 0"
	case protocol.ErrNameTooLong:
		reason = "lock name too long: the limit is " + strconv.Itoa(protocol.MaxNameLen) + " bytes"
	case protocol.ErrInvalidUTF8:
		reason = "lock name is not valid UTF-8: send the name as UTF-8 bytes"
	default:
		reason = pe.Error()
	}
	o.rejectWith(s, pe, reason)
}

// rejectWith sends ERROR(code, reason) and marks the session for closing.
func (o *owner) rejectWith(s *session, pe *protocol.Error, reason string) {
	if e := o.log.Debug(); e.Enabled() {
		e.Str("remote", s.remoteAddr()).Str("code", pe.Code.Label()).Msg(reason)
	}
	o.sendError(s, pe.Code, reason)
	o.closeSession(s, locktable.ReleaseProtocolError, "")
}

// quote renders a lock name for an error reason.
func quote(name string) string { return strconv.Quote(name) }

// deny refuses an ACQUIRE the access-control list does not allow.
func (o *owner) deny(s *session, name string) {
	o.metrics.ACLDenied()
	if e := o.denyLog.Info(); e.Enabled() { // sampled; the metric counts every denial
		e.Str("identity", s.sec().identity()).Str("remote", s.remoteAddr()).Str("lock", name).Msg("ACQUIRE denied by the ACL")
	}
	o.audit.Denied(o.wall, name, s.sec().identity(), s.conn.RemoteAddr())
	o.rejectWith(s, protocol.ErrNotAuthorized, "not authorized for lock "+quote(name)+": identity "+quote(s.sec().identity())+" has no ACL rule for it; ask the operator to add one")
}
