package eventloop

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/monolock/monolock/eventloop/metrics"
	"github.com/monolock/monolock/locktable"
	"github.com/monolock/monolock/protocol"
	"github.com/monolock/monolock/protocol/admin"
)

// The admin API's shapes are declared once, in protocol/admin, for the
// server and its clients alike.
type (
	LockInfo   = admin.LockInfo
	HolderInfo = admin.HolderInfo
	WaiterInfo = admin.WaiterInfo
)

// Locks returns every lock with a holder, sorted by name, each with its full
// queue. It runs no caller code on the loop: callers filter the snapshot.
func (s *Server) Locks(ctx context.Context) ([]LockInfo, error) {
	var locks []LockInfo
	err := s.onLoop(ctx, func(o *owner) {
		for name, holder := range o.table.Locks() {
			locks = append(locks, o.lockInfo(name, holder))
		}
	})
	slices.SortFunc(locks, func(a, b LockInfo) int { return strings.Compare(a.Name, b.Name) })
	return locks, err
}

// Lock returns one lock; ok is false when the lock is idle.
func (s *Server) Lock(ctx context.Context, name string) (info LockInfo, ok bool, err error) {
	err = s.onLoop(ctx, func(o *owner) {
		if holder := o.table.Holder(name); holder != nil {
			info, ok = o.lockInfo(name, holder), true
		}
	})
	return info, ok, err
}

func (o *owner) lockInfo(name string, holder *locktable.Claim) LockInfo {
	h := holder.Value.(*session)
	info := LockInfo{
		Name: name,
		Holder: HolderInfo{
			Identity:   h.identity(),
			RemoteAddr: h.remoteAddr(),
			Since:      o.wallAt(h.since).UTC(),
			LeaseMS:    int64(h.leaseMS),
			Token:      holder.Token(),
		},
		Waiters: []WaiterInfo{},
	}
	for c := range o.table.Waiters(name) {
		w := c.Value.(*session)
		info.Waiters = append(info.Waiters, WaiterInfo{Identity: w.identity(), RemoteAddr: w.remoteAddr(), QueuedAt: o.wallAt(w.since).UTC()})
	}
	return info
}

// ForceRelease takes a lock from its holder: the holder gets ERROR 0x02 and
// is closed, and the next waiter is promoted. ok is false when the lock is
// idle; token is the token the holder lost.
func (s *Server) ForceRelease(ctx context.Context, name string) (token uint64, ok bool, err error) {
	err = s.onLoop(ctx, func(o *owner) {
		holder := o.table.Holder(name)
		if holder == nil {
			return
		}
		h := holder.Value.(*session)
		token, ok = holder.Token(), true
		if o.audit != nil {
			o.audit.ForceRelease(time.Now(), o.subject(h), token)
		}
		o.closeByAdmin(h, "closed by administrator: the lock was force-released; reconnect to queue again")
	})
	return token, ok, err
}

// KickWaiter removes the waiter with the given remote address from a lock's
// queue: it gets ERROR 0x02 and is closed; the others keep their order. ok is
// false when no such waiter exists.
func (s *Server) KickWaiter(ctx context.Context, name, remoteAddr string) (ok bool, err error) {
	err = s.onLoop(ctx, func(o *owner) {
		for c := range o.table.Waiters(name) {
			w := c.Value.(*session)
			if w.remoteAddr() != remoteAddr {
				continue
			}
			if o.audit != nil {
				o.audit.KickWaiter(time.Now(), o.subject(w))
			}
			o.closeByAdmin(w, "closed by administrator: removed from the queue; reconnect to queue again")
			ok = true
			return
		}
	})
	return ok, err
}

// closeByAdmin sends ERROR 0x02 and closes the session; closing a holder
// promotes the next waiter.
func (o *owner) closeByAdmin(s *session, reason string) {
	o.send(s, protocol.AppendError(o.out[:0], protocol.CodeClosedByAdmin, reason))
	if !s.closed {
		o.closeNow(s, metrics.ReleaseForce, "closed by administrator")
	}
}
