package eventloop

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/monolock/monolock/protocol"
)

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
		reason = fmt.Sprintf("unknown message type: 0x%02x; a client sends only ACQUIRE (0x01) and HEARTBEAT (0x02)", uint8(f.Type))
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
	o.closeSession(s, ReleaseProtocolError, "")
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
