package scenario

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/monolock/monolock/bench/check"
	"github.com/monolock/monolock/bench/hist"
	"github.com/monolock/monolock/bench/reactor"
	"github.com/monolock/monolock/protocol"
)

// sessionsLoad opens s long-lived sessions and keeps every one heartbeating
// by the client rules (S3): a heartbeat every lease/4, at most one in flight,
// and when a reply comes later than the interval the next heartbeat goes out
// right after it. Each session's first heartbeat comes at a random point of
// its first interval, so the load is spread evenly over time. Against monolock, sessions 0..s/2-1 hold lock i and
// sessions s/2..s-1 wait on lock i-s/2 (holders are all granted before the
// first waiter dials). Against the bare gnet server a session sends the
// heartbeat byte from the start, without an ACQUIRE.
type sessionsLoad struct {
	reactor.Base
	monolock bool
	sessionPairs
	interval int64

	conns    []*reactor.Conn
	rng      *rand.Rand
	lastAck  []int64 // send time of the last acknowledged frame, per session
	nextDial int
	dialStop int // dial up to here for now (holders first)
	inflight int // dialled and not yet answered
	ready    int

	allReady atomic.Bool

	heartbeatTally
	hbTotal   uint64
	lostConns int
	err       error
}

// heartbeatTally is what the heartbeat loads of S3 (sessionsLoad) and S6
// (goSessions) count for their driver, which opens the window [from, until)
// once every session is set up (measureHeartbeatWindow). goSessions guards
// the counters with its mutex.
type heartbeatTally struct {
	from, until atomic.Int64 // the window; never, until the driver sets it

	hist     hist.Histogram // heartbeat RTT inside the window
	hbWindow uint64         // heartbeats answered inside the window
	late     uint64         // heartbeats sent late because the previous reply was late
	promoted uint64         // waiters granted: a holder was dropped
}

// closeWindow sets the window to never, for the setup.
func (t *heartbeatTally) closeWindow() {
	t.from.Store(1 << 62)
	t.until.Store(1 << 62)
}

// sessionPairs are the s sessions of S3 and S6 and their locks: sessions
// 0..s/2-1 hold lock i, sessions s/2..s-1 wait on lock i-s/2.
type sessionPairs struct {
	s     int
	lease time.Duration
	names []string // per lock (acquireRequests); none against the bare gnet server
	reqs  [][]byte // per lock, its ACQUIRE
	chk   *check.Checker
}

// lock returns the lock index of session id.
func (p *sessionPairs) lock(id int) int {
	if locks := p.s / 2; id >= locks {
		return id - locks
	}
	return id
}

func (p *sessionPairs) holder(id int) bool { return id < p.s/2 }

// judge checks an answer f to session id at now (first: its first answer),
// granted and token being the session's state: holders keep their token,
// waiters wait, and a waiter granted means its holder was dropped, which
// the checker judges against the holder's last acknowledged heartbeat
// (lastAck of the holder's id) and the lease. It reports whether f promoted
// a waiter.
func (p *sessionPairs) judge(id int, f *protocol.Frame, now int64, first bool, granted *bool, token *uint64, lastAck func(holder int) int64) (promoted bool) {
	lk := p.lock(id)
	switch {
	case f.Type == protocol.TypeAcquired && *granted:
		if f.Token != *token {
			p.chk.Report("session %d on %q: token changed from %d to %d", id, p.names[lk], *token, f.Token)
		}
	case f.Type == protocol.TypeAcquired:
		if !p.holder(id) {
			promoted = true
			p.chk.Lapse(p.names[lk], lk, lastAck(lk)+int64(p.lease)) // lock lk's holder is session lk
		}
		*granted, *token = true, f.Token
		p.chk.Grant(p.names[lk], id, now, f.Token, true)
	case f.Type == protocol.TypeWaiting && *granted:
		p.chk.Report("session %d on %q: WAITING after ACQUIRED", id, p.names[lk])
	case f.Type == protocol.TypeWaiting && first && p.holder(id):
		p.chk.Report("session %d on %q: a free lock answered WAITING", id, p.names[lk])
	}
	return promoted
}

// acquireRequests are the names and ACQUIRE frames of locks prefix-0 up to
// prefix-(locks-1), for a holder and a waiter each.
func acquireRequests(prefix string, locks int, lease time.Duration) (names []string, reqs [][]byte) {
	for i := range locks {
		name := fmt.Sprintf("%s-%d", prefix, i)
		names = append(names, name)
		reqs = append(reqs, protocol.AppendAcquire(nil, uint32(lease.Milliseconds()), name))
	}
	return names, reqs
}

const (
	maxInflightDials = 256
	timerHeartbeat   = 1
)

func newSessionsLoad(monolock bool, s int, lease time.Duration, chk *check.Checker) *sessionsLoad {
	l := &sessionsLoad{
		monolock: monolock, sessionPairs: sessionPairs{s: s, lease: lease, chk: chk}, interval: int64(lease / 4),
		conns: make([]*reactor.Conn, s), lastAck: make([]int64, s), rng: rand.New(rand.NewPCG(uint64(s), 3)),
	}
	l.dialStop = s
	if monolock {
		locks := s / 2
		l.dialStop = locks
		l.names, l.reqs = acquireRequests("s3", locks, lease)
	}
	l.closeWindow()
	return l
}

func (l *sessionsLoad) start(r *reactor.Reactor) { l.dialMore(r) }

func (l *sessionsLoad) dialMore(r *reactor.Reactor) {
	for l.inflight < maxInflightDials && l.nextDial < l.dialStop {
		id := l.nextDial
		c, err := r.Dial(id)
		if err != nil {
			l.err = fmt.Errorf("dial session %d: %w", id, err)
			r.Abort(l.err)
			return
		}
		l.conns[id] = c
		l.nextDial++
		l.inflight++
	}
}

func (l *sessionsLoad) Connected(r *reactor.Reactor, c *reactor.Conn) {
	c.T0 = r.Tick()
	if l.monolock {
		_ = r.Send(c, l.reqs[l.lock(c.ID)])
	} else {
		_ = r.Send(c, heartbeatFrame)
	}
}

func (l *sessionsLoad) Frame(r *reactor.Reactor, c *reactor.Conn, f *protocol.Frame) {
	now := r.Tick()
	if f.Type == protocol.TypeError {
		l.err = fmt.Errorf("session %d: ERROR %#x %q", c.ID, byte(f.Code), f.Reason)
		r.Abort(l.err)
		return
	}
	first := !c.Granted && c.Flag == 0
	if first {
		c.Flag = 1 // answered once
		l.inflight--
		l.ready++
		if l.monolock {
			l.checkState(c, f, now, true)
		}
		l.lastAck[c.ID] = c.T0
		// The first heartbeat comes at a random point of the first interval
		// (earlier than the rule requires, never later), so that sessions
		// opened in one burst do not heartbeat in bursts ever after.
		r.After(c.T0+l.rng.Int64N(l.interval)+1, c, timerHeartbeat)
		if l.ready == l.dialStop && l.dialStop < l.s {
			l.dialStop = l.s // holders are in: now the waiters
		}
		if l.ready == l.s {
			l.allReady.Store(true)
		}
		l.dialMore(r)
		return
	}
	if !c.HbOut {
		if l.monolock && f.Type == protocol.TypeAcquired {
			l.checkState(c, f, now, false) // a pushed promotion
			return
		}
		l.err = fmt.Errorf("session %d: unsolicited frame %#x", c.ID, byte(f.Type))
		r.Abort(l.err)
		return
	}
	c.HbOut = false
	l.hbTotal++
	if now >= l.from.Load() && now < l.until.Load() {
		l.hbWindow++
		l.hist.Record(now - c.T0)
	}
	if l.monolock {
		l.checkState(c, f, now, false)
	}
	l.lastAck[c.ID] = c.T0
	if c.Flag == 2 { // the interval passed while this one was in flight
		c.Flag = 1
		l.late++
		l.beat(r, c)
		return
	}
	r.After(c.T0+l.interval, c, timerHeartbeat)
}

// checkState checks a monolock answer (sessionPairs.judge).
func (l *sessionsLoad) checkState(c *reactor.Conn, f *protocol.Frame, now int64, first bool) {
	if l.judge(c.ID, f, now, first, &c.Granted, &c.Token, func(h int) int64 { return l.lastAck[h] }) {
		l.promoted++
	}
}

func (l *sessionsLoad) beat(r *reactor.Reactor, c *reactor.Conn) {
	c.T0 = r.Tick()
	c.HbOut = true
	_ = r.Send(c, heartbeatFrame)
}

func (l *sessionsLoad) Timer(r *reactor.Reactor, c *reactor.Conn, _ uint8) {
	if c.HbOut {
		c.Flag = 2
		return
	}
	l.beat(r, c)
}

func (l *sessionsLoad) Lost(r *reactor.Reactor, c *reactor.Conn, err error) {
	l.lostConns++
	l.err = fmt.Errorf("session %d lost: %w", c.ID, err)
	r.Abort(l.err)
}
