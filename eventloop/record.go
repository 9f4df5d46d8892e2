package eventloop

import (
	"time"
)

// granted does the bookkeeping of a grant, first or by promotion: metrics and
// the audit event. Each grant issues one fencing token, which is what
// monolock_acquires_total counts.
func (o *owner) granted(s *session, wall time.Time, now time.Duration) {
	wait := now - s.since
	s.since = now
	o.metrics.Granted(wait)
	if o.audit != nil {
		o.audit.Granted(wall, s.claim.Name(), s.identity(), s.conn.RemoteAddr(), s.claim.Token(), wait)
	}
}

// released does the bookkeeping of a holder's release. For one lock it always
// runs before the grant to the next holder.
func (o *owner) released(s *session, wall time.Time, now time.Duration) {
	held := now - s.since
	o.metrics.Released(s.closeReason.String(), held)
	if o.audit != nil {
		o.audit.Released(wall, s.claim.Name(), s.identity(), s.conn.RemoteAddr(), s.claim.Token(), held, s.closeReason.String())
	}
}
