package eventloop

// granted does the bookkeeping of a grant, first or by promotion: metrics and
// the audit event. Each grant issues one fencing token, which is what
// monolock_acquires_total counts.
func (o *owner) granted(s *session) {
	wait := o.now - s.since
	s.since = o.now
	o.metrics.Granted(wait)
	o.audit.Granted(o.wall, s.claim.Name(), s.sec().identity(), s.conn.RemoteAddr(), s.claim.Token(), wait)
}

// released does the bookkeeping of a holder's release. For one lock it always
// runs before the grant to the next holder.
func (o *owner) released(s *session) {
	held := o.now - s.since
	o.metrics.Released(s.closeReason, held)
	o.audit.Released(o.wall, s.claim.Name(), s.sec().identity(), s.conn.RemoteAddr(), s.claim.Token(), held, s.closeReason.String())
}
