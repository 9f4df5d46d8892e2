package eventloop

import (
	"context"
	"time"
)

// The etcd side's events (package haetcd), each a call into the loop: a
// turn of its own, whose rules are in ha.go. Times are the etcd side's
// readings of the process's clock (time.Now, with its monotonic reading);
// the loop turns them into its own offsets. term is the etcd side's count
// of terms won: an event of a term the loop has ended is ignored.

// HAElected starts term: this node won the election at wonAt; the newest
// keepalive etcd answered was sent at sentAt; maxLeaseMS is the largest
// lease any leader granted, as etcd stores it; creditMS is what the new
// leader's wait may be shortened by (0.2 × the smallest TTL any leader of
// the cluster led with; 0 when that is not known): see ha.go.
func (s *Server) HAElected(ctx context.Context, term uint64, wonAt, sentAt time.Time, maxLeaseMS, creditMS uint32) error {
	return s.call(ctx, func(o *owner) {
		o.haElected(term, o.offsetAt(wonAt), o.offsetAt(sentAt), maxLeaseMS, creditMS)
	})
}

// HAKeepalive says etcd answered a keepalive of term sent at sentAt.
func (s *Server) HAKeepalive(ctx context.Context, term uint64, sentAt time.Time) error {
	return s.call(ctx, func(o *owner) { o.haKeepalive(term, o.offsetAt(sentAt)) })
}

// HATokenBlock hands in the token block [lo, hi) reserved in etcd for term.
func (s *Server) HATokenBlock(ctx context.Context, term, lo, hi uint64) error {
	return s.call(ctx, func(o *owner) { o.haTokenBlock(term, lo, hi) })
}

// HAMaxLease says etcd stores max-lease ms, written for term.
func (s *Server) HAMaxLease(ctx context.Context, term uint64, ms uint32) error {
	return s.call(ctx, func(o *owner) { o.haMaxLease(term, ms) })
}

// HALost ends term: the etcd side lost it (why).
func (s *Server) HALost(ctx context.Context, term uint64, why string) error {
	return s.call(ctx, func(o *owner) { o.haLost(term, why) })
}

// HAStatus is the node's role as the loop sees it; it does not wait for the
// loop.
func (s *Server) HAStatus() HAStatus { return s.handler.owner.haStatusNow() }

// offsetAt is t on the owner's monotonic offsets. The turn's wall reading
// and t both carry the process's monotonic clock, so their difference is
// exact whatever the wall clock did.
func (o *owner) offsetAt(t time.Time) time.Duration { return o.now - o.wall.Sub(t) }
