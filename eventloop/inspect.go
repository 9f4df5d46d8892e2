package eventloop

import (
	"context"
	"net/netip"
	"slices"

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

// snapshotTurn bounds the sessions one turn of a lock listing visits, so
// that a listing of tens of thousands of sessions never holds the loop for
// more than a fraction of a millisecond at a time.
const snapshotTurn = 512

// Locks returns every lock with a holder whose name match accepts (all of
// them for a nil match), sorted by name, each with its full queue. The names
// are read in one turn of the loop and matched here, off the loop; the
// details are then read in turns of at most snapshotTurn sessions. Each lock
// is consistent in itself; a lock released between turns is left out.
func (s *Server) Locks(ctx context.Context, match func(name string) bool) ([]LockInfo, error) {
	var names []string
	err := s.call(ctx, func(o *owner) {
		names = make([]string, 0, o.table.Held())
		for name := range o.table.Locks() {
			names = append(names, name)
		}
	})
	if err != nil {
		return nil, err
	}
	if match != nil {
		names = slices.DeleteFunc(names, func(name string) bool { return !match(name) })
	}
	slices.Sort(names)
	locks := make([]LockInfo, 0, len(names))
	for rest := names; len(rest) > 0; {
		err := s.call(ctx, func(o *owner) {
			for visited := 0; len(rest) > 0 && visited < snapshotTurn; rest = rest[1:] {
				holder := o.table.Holder(rest[0])
				if holder == nil {
					continue
				}
				info := o.lockInfo(rest[0], holder)
				visited += 1 + len(info.Waiters)
				locks = append(locks, info)
			}
		})
		if err != nil {
			return nil, err
		}
	}
	return locks, nil
}

// Lock returns one lock; ok is false when the lock is idle.
func (s *Server) Lock(ctx context.Context, name string) (info LockInfo, ok bool, err error) {
	err = s.call(ctx, func(o *owner) {
		if holder := o.table.Holder(name); holder != nil {
			info, ok = o.lockInfo(name, holder), true
		}
	})
	return info, ok, err
}

func (o *owner) lockInfo(name string, holder *locktable.Claim[*session]) LockInfo {
	h := holder.Value
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
		w := c.Value
		info.Waiters = append(info.Waiters, WaiterInfo{Identity: w.identity(), RemoteAddr: w.remoteAddr(), QueuedAt: o.wallAt(w.since).UTC()})
	}
	return info
}

// ForceRelease takes a lock from its holder: the holder gets ERROR 0x02 and
// is closed, and the next waiter is promoted. ok is false when the lock is
// idle; token is the token the holder lost.
func (s *Server) ForceRelease(ctx context.Context, name string) (token uint64, ok bool, err error) {
	err = s.call(ctx, func(o *owner) {
		holder := o.table.Holder(name)
		if holder == nil {
			return
		}
		h := holder.Value
		token, ok = holder.Token(), true
		if o.audit != nil {
			wall, _ := o.clock()
			o.audit.ForceRelease(wall, name, h.identity(), h.conn.RemoteAddr(), token)
		}
		o.closeByAdmin(h, "closed by administrator: the lock was force-released; reconnect to queue again")
	})
	return token, ok, err
}

// KickWaiter removes the waiter with the given remote address from a lock's
// queue: it gets ERROR 0x02 and is closed; the others keep their order. ok is
// false when no such waiter exists.
func (s *Server) KickWaiter(ctx context.Context, name, remoteAddr string) (ok bool, err error) {
	// Parsed here, off the loop, and compared without formatting each
	// waiter's address: the queue may hold thousands. Only the text the
	// server itself shows (RemoteAddr().String()) names a waiter.
	want, perr := netip.ParseAddrPort(remoteAddr)
	if perr != nil || want.String() != remoteAddr {
		return false, nil
	}
	err = s.call(ctx, func(o *owner) {
		for c := range o.table.Waiters(name) {
			w := c.Value
			if !w.hasAddr(want) {
				continue
			}
			if o.audit != nil {
				wall, _ := o.clock()
				o.audit.KickWaiter(wall, name, w.identity(), w.conn.RemoteAddr())
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
	o.sendError(s, protocol.CodeClosedByAdmin, reason)
	if !s.closed {
		o.closeNow(s, ReleaseForce, "closed by administrator")
	}
}
