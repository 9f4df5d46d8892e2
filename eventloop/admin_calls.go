package eventloop

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/netip"
	"slices"

	"github.com/monolock/monolock/locktable"
	"github.com/monolock/monolock/protocol"
	"github.com/monolock/monolock/protocol/admin"
)

// This file is the admin calls into the loop: reads and changes another
// goroutine asks for, each run on the loop as calls of bounded size
// (control_conn.go), each call a turn of the owner.

// snapshotTurn bounds the sessions one call of a lock listing visits, so
// that a listing of tens of thousands of sessions never holds the loop for
// more than a fraction of a millisecond at a time (a session costs about
// 2 µs to describe).
const snapshotTurn = 128

// maxRereads bounds how often one lock is read again because it changed
// hands, or the waiter a piece ended at left, between two pieces.
const maxRereads = 3

// ErrLockMoving reports a lock whose queue changed under every attempt to
// read it in pieces.
var ErrLockMoving = errors.New("the lock's queue changed while it was being read in pieces; retry")

// Locks returns the page q selects of the locks with a holder, each with
// its full queue. The names are read in calls of at most namesPerCall (see
// lockNames), matched, sorted and cut to the page here, off the loop; only
// the page's details are then read, in calls of at most snapshotTurn
// sessions, so a page costs the loop its names and its own sessions, not
// every lock's. Each lock is read as lockReader describes; a lock released
// between calls is left out, so a page may hold fewer than Limit.
func (s *Server) Locks(ctx context.Context, q admin.LockQuery) (admin.LockList, error) {
	names, err := s.lockNames(ctx)
	if err != nil {
		return admin.LockList{}, err
	}
	if q.Match != nil {
		names = slices.DeleteFunc(names, func(name string) bool { return !q.Match(name) })
	}
	slices.Sort(names)
	page := admin.LockList{Total: len(names)}
	if q.After != "" {
		i, found := slices.BinarySearch(names, q.After)
		if found {
			i++
		}
		names = names[i:]
	}
	if q.Limit > 0 && len(names) > q.Limit {
		names = names[:q.Limit]
		page.Next = names[len(names)-1]
	}
	locks, err := s.readLocks(ctx, names)
	page.Locks = locks
	return page, err
}

// readLocks reads the named locks, sorted, leaving out those that are idle.
func (s *Server) readLocks(ctx context.Context, names []string) ([]admin.LockInfo, error) {
	locks := make([]admin.LockInfo, 0, len(names))
	var r *lockReader
	rereads := 0
	for len(names) > 0 || r != nil {
		var moved error
		err := s.call(ctx, func(o *owner) {
			for budget := snapshotTurn; budget > 0 && (len(names) > 0 || r != nil); {
				if r == nil {
					r, names = &lockReader{name: names[0]}, names[1:]
				}
				budget -= r.step(o, budget)
				switch {
				case !r.done:
				case r.moved && rereads < maxRereads:
					rereads++
					r = &lockReader{name: r.name}
				case r.moved:
					moved = fmt.Errorf("list lock %q: %w", r.name, ErrLockMoving)
					return
				default:
					if r.held {
						locks = append(locks, r.info)
					}
					r, rereads = nil, 0
				}
			}
		})
		if err == nil {
			err = moved
		}
		if err != nil {
			return nil, err
		}
	}
	for i := range locks {
		dropHolder(&locks[i])
	}
	return locks, nil
}

// namesPerCall bounds the lock names one call copies: a map step and an
// append each, so a call takes well under a millisecond.
const namesPerCall = 4096

// lockNames returns the name of every held lock, read in calls of at most
// namesPerCall names. The table's map is walked by one iteration suspended
// between calls (iter.Pull, resumed only on the loop): as with a map range,
// a lock released before it is reached is left out, and one created
// meanwhile may or may not be listed.
func (s *Server) lockNames(ctx context.Context) ([]string, error) {
	var (
		names []string
		next  func() (string, *locktable.Claim[*session], bool)
		stop  func()
		done  bool
	)
	for !done {
		err := s.call(ctx, func(o *owner) {
			if next == nil {
				names = make([]string, 0, o.table.Held())
				next, stop = iter.Pull2(o.table.Locks())
			}
			for range namesPerCall {
				name, _, ok := next()
				if !ok {
					done = true
					return
				}
				names = append(names, name)
			}
		})
		if err != nil {
			if next != nil && !done { // the walk must end on the loop, where it runs
				_ = s.call(context.WithoutCancel(ctx), func(*owner) { stop() })
			}
			return nil, err
		}
	}
	return names, nil
}

// Lock returns one lock; ok is false when the lock is idle. Its queue is
// read in pieces of at most snapshotTurn waiters, one piece per call, so a
// queue of any length never holds the loop for long. Concurrent reads of the
// same lock share one reading (see sharedReads).
func (s *Server) Lock(ctx context.Context, name string) (info admin.LockInfo, ok bool, err error) {
	return s.reads.read(ctx, name, s.readLock)
}

// readLock reads one lock in pieces, starting over when it moved.
func (s *Server) readLock(ctx context.Context, name string) (admin.LockInfo, bool, error) {
	for attempt := 0; ; attempt++ {
		r := &lockReader{name: name}
		for !r.done {
			if err := s.call(ctx, func(o *owner) { r.step(o, snapshotTurn) }); err != nil {
				return admin.LockInfo{}, false, err
			}
		}
		switch {
		case !r.moved:
			dropHolder(&r.info)
			return r.info, r.held, nil
		case attempt == maxRereads:
			return admin.LockInfo{}, false, fmt.Errorf("read lock %q: %w", name, ErrLockMoving)
		}
	}
}

// lockReader reads one lock a piece at a time: the holder and the first
// waiters in the first piece, each later piece behind the last waiter read.
// The queue may move in between. A waiter that joins is listed at the end;
// one that leaves after its piece was read is still listed, unless it is
// the holder now (see dropHolder); the holder shown is the one at the last
// piece. If the waiter a piece ended at leaves the queue, the reading cannot
// resume: it is marked moved and must start over. A lock that goes idle
// meanwhile is read as idle.
type lockReader struct {
	name    string
	started bool
	last    *locktable.Claim[*session] // the last waiter read
	info    admin.LockInfo
	held    bool // the lock has a holder
	done    bool
	moved   bool
}

// step reads at most budget sessions (at least one) and returns how many it
// read.
func (r *lockReader) step(o *owner, budget int) int {
	holder := o.table.Holder(r.name)
	if holder == nil {
		r.held, r.done = false, true
		return 1
	}
	switch {
	case !r.started:
		r.started, r.held = true, true
		r.info = admin.LockInfo{Name: r.name, Waiters: []admin.WaiterInfo{}}
	case r.last != nil && (r.last.State() != locktable.Waiting || r.last.Name() != r.name):
		r.moved, r.done = true, true
		return 1
	}
	r.info.Holder = o.holderInfo(holder)
	var next *locktable.Claim[*session]
	if r.last == nil {
		for c := range o.table.Waiters(r.name) {
			next = c
			break
		}
	} else {
		next = r.last.NextWaiter()
	}
	used := 1
	for ; next != nil && used < budget; next = next.NextWaiter() {
		r.info.Waiters = append(r.info.Waiters, o.waiterInfo(next.Value, len(r.info.Waiters)+1))
		r.last = next
		used++
	}
	r.done = next == nil
	return used
}

// dropHolder removes from a lock read in pieces the waiter that has become
// its holder since its piece was read, and numbers the rest from 1. It runs
// off the loop.
func dropHolder(info *admin.LockInfo) {
	info.Waiters = slices.DeleteFunc(info.Waiters, func(w admin.WaiterInfo) bool { return w.RemoteAddr == info.Holder.RemoteAddr })
	for i := range info.Waiters {
		info.Waiters[i].Position = i + 1
	}
}

func (o *owner) holderInfo(holder *locktable.Claim[*session]) admin.HolderInfo {
	h := holder.Value
	return admin.HolderInfo{
		Identity:   h.sec().identity(),
		RemoteAddr: h.remoteAddr(),
		Since:      o.wallAt(h.since).UTC(),
		LeaseMS:    int64(h.leaseMS),
		Token:      holder.Token(),
		// lastSeen is the ACQUIRE or HEARTBEAT frame's turn, as since is
		// the grant's.
		LastHeartbeat: o.wallAt(h.lastSeen).UTC(),
	}
}

func (o *owner) waiterInfo(w *session, position int) admin.WaiterInfo {
	return admin.WaiterInfo{Position: position, Identity: w.sec().identity(), RemoteAddr: w.remoteAddr(), QueuedAt: o.wallAt(w.since).UTC()}
}

// ForceRelease takes a lock from its holder: the holder gets ERROR 0x02 and
// is closed, and the next waiter is promoted. ok is false when the lock is
// idle; token is the token the holder lost. operator is who asked (the
// admin caller's identity, "" without mutual TLS), for the audit log.
func (s *Server) ForceRelease(ctx context.Context, name, operator string) (token uint64, ok bool, err error) {
	err = s.call(ctx, func(o *owner) {
		holder := o.table.Holder(name)
		if holder == nil {
			return
		}
		h := holder.Value
		token, ok = holder.Token(), true
		o.audit.ForceRelease(o.wall, name, h.sec().identity(), h.conn.RemoteAddr(), token, operator)
		o.closeByAdmin(h, "closed by administrator: the lock was force-released; reconnect to queue again")
	})
	return token, ok, err
}

// KickWaiter removes the waiter with the given remote address from a lock's
// queue: it gets ERROR 0x02 and is closed; the others keep their order. ok is
// false when no such waiter exists. operator is who asked, as for
// ForceRelease.
func (s *Server) KickWaiter(ctx context.Context, name, remoteAddr, operator string) (ok bool, err error) {
	// Parsed here, off the loop, and compared without formatting each
	// waiter's address: the queue may hold thousands. Only the text the
	// server itself shows (RemoteAddr().String()) names a waiter.
	want, perr := netip.ParseAddrPort(remoteAddr)
	if perr != nil || want.String() != remoteAddr {
		return false, nil
	}
	// The queue is searched kickPerCall waiters a call, resuming behind
	// the last one looked at; if that one has left meanwhile, the search
	// starts over.
	for attempt := 0; ; attempt++ {
		var last *locktable.Claim[*session]
		done, moved := false, false
		for !done {
			err = s.call(ctx, func(o *owner) {
				var next *locktable.Claim[*session]
				switch {
				case last == nil:
					for c := range o.table.Waiters(name) {
						next = c
						break
					}
				case last.State() != locktable.Waiting || last.Name() != name:
					moved, done = true, true
					return
				default:
					next = last.NextWaiter()
				}
				for n := 0; next != nil && n < kickPerCall; n++ {
					if w := next.Value; w.hasAddr(want) {
						o.audit.KickWaiter(o.wall, name, w.sec().identity(), w.conn.RemoteAddr(), operator)
						o.closeByAdmin(w, "closed by administrator: removed from the queue; reconnect to queue again")
						ok, done = true, true
						return
					}
					last, next = next, next.NextWaiter()
				}
				done = next == nil
			})
			if err != nil {
				return false, err
			}
		}
		switch {
		case !moved:
			return ok, nil
		case attempt == maxRereads:
			return false, fmt.Errorf("kick a waiter of lock %q: %w", name, ErrLockMoving)
		}
	}
}

// kickPerCall bounds the waiters one call of KickWaiter compares, tens of
// nanoseconds each.
const kickPerCall = 4096

// closeByAdmin sends ERROR 0x02 and closes the session; closing a holder
// promotes the next waiter.
func (o *owner) closeByAdmin(s *session, reason string) {
	o.sendError(s, protocol.CodeClosedByAdmin, reason)
	o.closeSession(s, locktable.ReleaseForce, "closed by administrator")
}

// SetAuthorizer replaces the access-control decision for new ACQUIREs; nil
// allows every lock. Sessions already granted or queued are not re-judged.
func (s *Server) SetAuthorizer(ctx context.Context, a Authorizer) error {
	return s.call(ctx, func(o *owner) { o.authorizer = a })
}

// Stats reads a consistent snapshot on the event loop.
func (s *Server) Stats(ctx context.Context) (admin.Stats, error) {
	var st admin.Stats
	err := s.call(ctx, func(o *owner) {
		st = admin.Stats{
			Sessions: o.sessions.len, Locks: o.table.Held(), Waiters: o.table.Waiting(), Timers: o.wheel.Len(),
			Grants: o.grants, Expiries: o.expiries, NewestToken: o.table.LastToken(),
		}
	})
	return st, err
}
