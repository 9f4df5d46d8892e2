package eventloop

import (
	"sync/atomic"
	"time"

	"github.com/monolock/monolock/locktable"
	"github.com/monolock/monolock/protocol"
)

// This file is the loop's side of failover through etcd (Config.HA): the
// rules of a term, with the turn's clock. The etcd client runs beside the
// loop (package haetcd) and tells it what happened through the control
// connection, like every other outside event (ha_calls.go): elected,
// a keepalive answered (when it was sent), a token block, the max-lease
// stored, lost. The loop never waits for etcd; what it needs from etcd it
// asks HACoordinator for, without waiting.
//
// The rules:
//
//   - The leader's deadline is sentAt + 0.8 × TTL, sentAt being when the
//     newest keepalive etcd answered was sent. At the start of every turn,
//     before any frame is read and any grant made (begin), a passed
//     deadline ends the term: every session gets ERROR 0x01 and is closed
//     (release reason demoted), nothing is granted, the lock listener
//     closes, and the node campaigns again. Since etcd renews the lease
//     no earlier than it receives the keepalive, which is after sentAt, the
//     old leader stops at sentAt + 0.8·TTL < sentAt + TTL ≤ the lease's
//     expiry ≤ the moment another node can be elected.
//   - A new leader serves (opens the lock listener) only once
//     max(0, maxLease − credit) has passed since it won, maxLease being the
//     largest lease any leader granted (max-lease, stored in etcd) and
//     credit 0.2 × the smallest TTL any leader of the cluster led with
//     (min-ttl, stored in etcd; 0 when absent): every holder of the old
//     leader has given up by then. The old leader answered nothing after
//     sentAt + 0.8·TTL_old, and the new leader won no earlier than
//     sentAt + TTL_old (the lease expired) or 0.2·TTL_old after the old
//     loop ended its term (the etcd side gives the key up only then), so
//     at least 0.2·TTL_old ≥ credit separates the old leader's last answer
//     from the win: the single server's distance, lease, between a holder's
//     last answered heartbeat and the next grant is kept. It also waits
//     for its first token block.
//   - A grant whose lease exceeds the stored max-lease waits until etcd has
//     stored the larger one (the claim is Pending in the lock table).
//   - Tokens come only from blocks reserved in etcd (locktable, blocks.go):
//     a grant without a token left waits for the next block, asked for when
//     half of the current one is used.
//   - A grant that waits on a free lock answers the ACQUIRE only when it is
//     made (ACQUIRED, an etcd round trip later), never WAITING: the lock is
//     free, and nobody is ahead of the client. A waiter whose turn comes
//     while the grant waits was told WAITING already and is pushed ACQUIRED.
//   - A follower has no lock listener: clients are refused at connect and
//     move on to the next address at once. A connection that slipped in
//     before the listener closed is answered ERROR 0x01.

// HAConfig makes the server one node of a cluster led through etcd.
type HAConfig struct {
	// TTL is the etcd lease's: the leader's deadline is 0.8 × TTL after the
	// newest keepalive etcd answered was sent.
	TTL time.Duration
	// Coordinator is told what the loop needs from etcd.
	Coordinator HACoordinator
}

// HACoordinator is the etcd side, as the loop sees it. Its methods are
// called on the loop and must return at once: they only note the request
// (the etcd client answers through the Server's HA methods, ha_calls.go).
// term says which term the request belongs to.
type HACoordinator interface {
	// NeedTokenBlock asks for the next block of tokens (HATokenBlock).
	NeedTokenBlock(term uint64)
	// NeedMaxLease asks that max-lease be raised to ms (HAMaxLease).
	NeedMaxLease(term uint64, ms uint32)
	// TermEnded says the loop ended term (why): resign and campaign again.
	TermEnded(term uint64, why string)
}

// leaderShare is the part of the TTL a leader serves after the newest
// keepalive etcd answered was sent: 0.8, in tenths.
const leaderShare = 8

// haState is the loop's state of its terms; only the loop touches it but
// status, which other goroutines read.
type haState struct {
	on    bool
	ttl   time.Duration
	coord HACoordinator

	term     uint64        // the term in progress, or the last one
	leading  bool          // elected, and the term has not ended
	serving  bool          // leading and the new leader's wait is over
	deadline time.Duration // the leader's deadline (owner offset)
	openAt   time.Duration // the end of the new leader's wait
	maxLease uint32        // max-lease as etcd stores it, ms
	asked    uint32        // the largest max-lease asked for this term
	blocking bool          // a token block is asked for and has not come

	listen func(bool) // opens (true) or closes the lock listener, without waiting

	status haStatus
}

// haStatus is what other goroutines read of the loop's HA state.
type haStatus struct {
	leading atomic.Bool
	serving atomic.Bool
	term    atomic.Uint64
	terms   atomic.Uint64 // terms won since start
}

// HAStatus is a node's role as its loop sees it.
type HAStatus struct {
	Enabled bool
	Leading bool   // elected, the term in progress
	Serving bool   // leading, the new leader's wait over: the lock listener is open
	Term    uint64 // the term in progress or the last one
	Terms   uint64 // terms won since start
}

func (o *owner) initHA(cfg *HAConfig, listen func(bool)) {
	if cfg == nil {
		return
	}
	o.ha = haState{on: true, ttl: cfg.TTL, coord: cfg.Coordinator, listen: listen}
	o.table.UseBlocks(func(c *locktable.Claim[*session]) bool { return c.Value.leaseMS <= o.ha.maxLease })
}

// refusing reports whether the server takes no sessions: it is shutting
// down, or it is a node that does not serve.
func (o *owner) refusing() bool { return o.shuttingDown || (o.ha.on && !o.ha.serving) }

// refusalReason is the ERROR reason a refused connection or session is told, with
// the release reason of a session ended for it.
func (o *owner) refusalReason() (string, locktable.ReleaseReason) {
	if o.shuttingDown {
		return shuttingDownReason, locktable.ReleaseShutdown
	}
	return demotedReason, locktable.ReleaseDemoted
}

const demotedReason = "server shutting down: this node is not the leader of its cluster any more; reconnect, to the next address of the cluster"

// haCheck runs at the start of every turn (begin): a passed deadline ends
// the term before anything else happens, and the end of the new leader's
// wait opens the listener, once the term's first token block is in hand
// (so that a client of a new leader is not told WAITING for a free lock).
func (o *owner) haCheck() {
	if !o.ha.leading {
		return
	}
	if o.now >= o.ha.deadline {
		o.endTerm("the leader's deadline passed: no keepalive answered by etcd within 0.8 × the TTL")
		return
	}
	if !o.ha.serving && o.now >= o.ha.openAt && o.table.HasTokens() {
		o.ha.serving = true
		o.ha.status.serving.Store(true)
		o.ha.listen(true) // which logs HAServingMessage once the port is open
	}
}

// The log lines of a term's changes, which harnesses wait for.
const (
	HAElectedMessage = "ha: elected leader; waiting out the longest lease before serving"
	HAServingMessage = "ha: leading: the lock port accepts connections"
	HAClosedMessage  = "ha: the lock port is closed"
	HAEndedMessage   = "ha: the term ended; the lock port is closed and the node campaigns again"
)

// haElected starts term: won at wonAt, the newest keepalive answered sent
// at sentAt, max-lease maxLease, the wait's credit credit (all as etcd's
// side saw them; the leases in ms).
func (o *owner) haElected(term uint64, wonAt, sentAt time.Duration, maxLease, credit uint32) {
	if !o.ha.on || o.shuttingDown || o.ha.leading || term <= o.ha.term {
		return
	}
	h := &o.ha
	h.term, h.leading, h.serving = term, true, false
	h.deadline = sentAt + h.ttl*leaderShare/10
	h.openAt = wonAt + time.Duration(maxLease-min(credit, maxLease))*time.Millisecond
	h.maxLease, h.asked, h.blocking = maxLease, maxLease, false
	h.status.term.Store(term)
	h.status.terms.Add(1)
	h.status.leading.Store(true)
	o.table.DropBlocks()
	o.log.Info().Uint64("term", term).Dur("wait", max(h.openAt-o.now, 0)).Uint32("credit_ms", credit).Dur("deadline_in", h.deadline-o.now).Msg(HAElectedMessage)
	o.armedAt(h.deadline)
	o.armedAt(h.openAt)
	o.askBlock()
	o.haCheck()
}

// haKeepalive moves the deadline: etcd answered a keepalive of term sent at
// sentAt.
func (o *owner) haKeepalive(term uint64, sentAt time.Duration) {
	if !o.ha.leading || term != o.ha.term {
		return
	}
	o.ha.deadline = max(o.ha.deadline, sentAt+o.ha.ttl*leaderShare/10)
}

// haTokenBlock hands in the block [lo, hi) reserved for term, and grants
// what waited for it.
func (o *owner) haTokenBlock(term, lo, hi uint64) {
	if !o.ha.leading || term != o.ha.term {
		return // a block of an ended term: never used
	}
	o.ha.blocking = false
	if err := o.table.AddBlock(lo, hi); err != nil {
		o.endTerm("a token block etcd reserved was refused: " + err.Error())
		return
	}
	o.table.Resume(o.promote)
	o.askBlock()
	o.haCheck() // the first block may end the new leader's wait
}

// haMaxLease records that etcd stores max-lease ms for term, and grants
// what waited for it.
func (o *owner) haMaxLease(term uint64, ms uint32) {
	if !o.ha.leading || term != o.ha.term {
		return
	}
	o.ha.maxLease = max(o.ha.maxLease, ms)
	o.ha.asked = max(o.ha.asked, ms)
	o.table.Resume(o.promote)
	o.askBlock()
}

// haLost ends term: etcd's side found it lost (a keepalive refused, a
// reservation that failed).
func (o *owner) haLost(term uint64, why string) {
	if !o.ha.leading || term != o.ha.term {
		return
	}
	o.endTerm(why)
}

// haAcquired notes the lease of an ACQUIRE: a lease above the max-lease
// asked for this term is asked for now, so that its grant waits as little
// as it can.
func (o *owner) haAcquired(leaseMS uint32) {
	if leaseMS > o.ha.asked && o.ha.leading {
		o.ha.asked = leaseMS
		o.ha.coord.NeedMaxLease(o.ha.term, leaseMS)
	}
}

// askBlock asks for the next token block once the table wants it.
func (o *owner) askBlock() {
	if o.ha.leading && !o.ha.blocking && o.table.WantsBlock() {
		o.ha.blocking = true
		o.ha.coord.NeedTokenBlock(o.ha.term)
	}
}

// endTerm ends the term in progress: every session is told ERROR 0x01 and
// closed (no promotion: the table's blocks are dropped, so a waiter whose
// turn comes is only Pending, and is closed too), the listener closes, and
// the etcd side is told to campaign again.
func (o *owner) endTerm(why string) {
	h := &o.ha
	h.leading, h.serving = false, false
	h.status.leading.Store(false)
	h.status.serving.Store(false)
	o.table.DropBlocks()
	h.listen(false)
	for s := o.sessions.head; s != nil; {
		next := s.at[everySession].next
		// A handshaking session is told once its handshake finishes
		// (handshake_loop.go); a closed one, whose close is this turn, not at all.
		if !s.sec().handshaking() && !s.closed && !s.closing {
			o.sendError(s, protocol.CodeShuttingDown, demotedReason)
			o.closeSession(s, locktable.ReleaseDemoted, "")
		}
		s = next
	}
	o.log.Warn().Uint64("term", h.term).Str("why", why).Msg(HAEndedMessage)
	h.coord.TermEnded(h.term, why)
}

// haStatus reads the loop's HA state from any goroutine.
func (o *owner) haStatusNow() HAStatus {
	st := &o.ha.status
	return HAStatus{Enabled: o.ha.on, Leading: st.leading.Load(), Serving: st.serving.Load(), Term: st.term.Load(), Terms: st.terms.Load()}
}

// haNextDue is when the ticker must wake the loop for the HA rules: the
// deadline, or the end of the new leader's wait if the first token block is
// in hand (else the block's arrival is the turn that opens the listener).
func (o *owner) haNextDue() (time.Duration, bool) {
	switch {
	case !o.ha.leading:
		return 0, false
	case !o.ha.serving && o.now < o.ha.openAt:
		return min(o.ha.deadline, o.ha.openAt), true
	}
	return o.ha.deadline, true
}
