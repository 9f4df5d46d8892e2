package eventloop

import (
	"context"
	"time"

	"github.com/monolock/monolock/locktable"
)

// At the descriptor limit the accept loop takes the newcomer through a
// door (accept.go): two descriptors kept free for the accept, so that the
// server sees where the newcomer comes from before deciding whom it
// replaces. A newcomer stuck in the kernel's backlog behind thousands of
// connections from one source would otherwise wait for each of them to be
// accepted and evicted in turn, which the eviction grace paces; through
// the door each of them is decided at once.
//
// The owner decides by the sessions that are not holders (waiters, and
// connections that have not sent ACQUIRE), counted per source
// (sources.go). A newcomer from source X, of which c(X) are open:
//
//  1. The fair share. If a source has at least c(X) + 2 of them, the newest
//     of the source with the most is closed and the newcomer takes its
//     place: no source keeps more than another source that needs room, from
//     the newcomer's first second, however young, alive or silent its
//     sessions are, and whatever their leases. The newest goes first, so
//     that a source keeps its oldest waiters' places in their queues. A
//     holder is never closed (its lease is what keeps another from working
//     under the same lock), and a source that nobody else needs room from —
//     a fleet behind one NAT address, alone at the limit — keeps all its
//     sessions.
//  2. Else the rules of release.go: the waiter silent for
//     -waiter-silence-limit, or the connection without ACQUIRE silent for
//     the eviction grace, silent longest first; but never one from a
//     source with fewer than c(X), so that a source at or above its share
//     only ever takes the place of its own sessions or of those of a
//     source at least as large.
//  3. Else nothing is closed for it, and the newcomer waits at the door
//     for a descriptor or for rule 2, instead of the kernel's backlog.
//     While its source is the only one with sessions (holders included)
//     and the kernel's accept queue is shorter than crowdBacklog, the
//     accept loop takes no other newcomer until it is let in, so the
//     backlog keeps its order, as it did before the door: one source's
//     clients get in first come, first served, at the pace rule 2 frees
//     room. Otherwise (another source is there, or the backlog is a crowd
//     that a first newcomer from another source must not be paced
//     behind) it goes on taking newcomers through the second door:
//     the next one is decided by the same rules, and if none admits it
//     either, of the two the one whose source has more is refused (closed
//     before it is a session). On a tie the one that has sent something (a
//     ClientHello, an ACQUIRE) waits and a silent one is refused, as the
//     eviction rules close the silent first; if neither or both have, the
//     newer waits (a client that gave up waiting has usually dialled
//     again). So once another source is there, every newcomer is decided
//     as soon as it reaches the front of the backlog, and a newcomer from
//     another source is never behind more than the one waiting. A newcomer
//     from the source of the one waiting, which the owner found could take
//     nothing, is such a tie: the accept loop settles it without asking the
//     owner, so that a source's newcomers beyond its share cost an accept
//     and a close each, and a newcomer from another source behind
//     thousands of them reaches the door in milliseconds.

// verdict is what happens to a newcomer at the descriptor limit.
type verdict uint8

const (
	// admitted: a session was closed in its place; enroll it.
	admitted verdict = iota + 1
	// waits: nothing may be closed for it yet; it waits at the door, and
	// the one that waited there before it, if any, is refused.
	waits
	// refused: the one waiting at the door comes from a source with fewer.
	refused
	// tied: as waits or refused, the two come from sources with as many;
	// the accept loop chooses (rule 3).
	tied
)

// admit decides a newcomer from source from at the descriptor limit, by
// the rules above; waiting is the source of the newcomer already waiting
// at the door, if hasWaiting. When it admits none, wait is how long until
// rule 2 may admit one (0: none will by itself). alone says that no other
// source has a session, holders included: the accept loop then leaves the
// backlog in its order (see rule 3).
func (o *owner) admit(from sourceKey, waiting sourceKey, hasWaiting bool) (v verdict, wait time.Duration, alone bool) {
	t := &o.sessions.sources
	alone = t.alone(from)
	have := t.count(from)
	if top := t.top(); top != nil && top.count >= have+2 {
		o.metrics.ShareEvicted()
		o.closeSession(top.tail, locktable.ReleaseIOTimeout, "closing the newest session of the source with the most that are not holders: no descriptor is left, and a newcomer from a source with fewer is waiting")
		return admitted, 0, alone
	}
	victim, wait := o.evictable()
	if victim != nil {
		if victim.src.count >= have {
			o.evictSilent(victim)
			return admitted, 0, alone
		}
		wait = 0 // it may never be: look again at the back-off's pace
	}
	if hasWaiting {
		switch waitingHas := t.count(waiting); {
		case have > waitingHas:
			return refused, wait, alone
		case have == waitingHas:
			return tied, wait, alone
		}
	}
	return waits, wait, alone
}

// admitCallTimeout bounds the accept loop's wait for a verdict. It is
// longer than evictCallTimeout: a newcomer from another source gets in by
// the verdict, so on a loop slowed by load it is better had late than
// not at all, and at the limit nobody gets in without the loop anyway.
const admitCallTimeout = time.Second

// admitCall asks the owner to decide a newcomer (see admit). A loop that
// does not answer within admitCallTimeout gives no verdict (0): the
// newcomer waits, to be decided again, and no one is refused for it.
func (s *Server) admitCall(from sourceKey, waiting sourceKey, hasWaiting bool) (v verdict, wait time.Duration, alone bool) {
	ctx, cancel := context.WithTimeout(context.Background(), admitCallTimeout)
	defer cancel()
	if s.call(ctx, func(o *owner) { v, wait, alone = o.admit(from, waiting, hasWaiting) }) != nil {
		return 0, 0, false
	}
	return v, wait, alone
}
