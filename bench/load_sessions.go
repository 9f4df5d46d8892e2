package main

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

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
	baseWorkload
	monolock bool
	s        int
	lease    time.Duration
	interval int64
	names    []string
	reqs     [][]byte
	chk      *Checker

	conns    []*rconn
	rng      *rand.Rand
	lastAck  []int64 // send time of the last acknowledged frame, per session
	nextDial int
	dialStop int // dial up to here for now (holders first)
	inflight int // dialled and not yet answered
	ready    int

	// Set by the driver: count heartbeats answered inside [from, until).
	from, until atomic.Int64
	allReady    atomic.Bool

	hist      Histogram // heartbeat RTT inside the window
	hbWindow  uint64    // heartbeats answered inside the window
	hbTotal   uint64
	late      uint64 // heartbeats sent late because the previous reply was late
	promoted  uint64 // waiters granted: a holder was dropped
	lostConns int
	err       error
}

const (
	maxInflightDials = 256
	timerHeartbeat   = 1
)

func newSessionsLoad(monolock bool, s int, lease time.Duration, chk *Checker) *sessionsLoad {
	l := &sessionsLoad{
		monolock: monolock, s: s, lease: lease, interval: int64(lease / 4), chk: chk,
		conns: make([]*rconn, s), lastAck: make([]int64, s), rng: rand.New(rand.NewPCG(uint64(s), 3)),
	}
	l.dialStop = s
	if monolock {
		locks := s / 2
		l.dialStop = locks
		for i := range locks {
			name := fmt.Sprintf("s3-%d", i)
			l.names = append(l.names, name)
			l.reqs = append(l.reqs, protocol.AppendAcquire(nil, uint32(lease.Milliseconds()), name))
		}
	}
	l.from.Store(1 << 62)
	l.until.Store(1 << 62)
	return l
}

// lock returns the lock index of session id.
func (l *sessionsLoad) lock(id int) int {
	locks := l.s / 2
	if id >= locks {
		return id - locks
	}
	return id
}

func (l *sessionsLoad) holder(id int) bool { return id < l.s/2 }

func (l *sessionsLoad) start(r *reactor) { l.dialMore(r) }

func (l *sessionsLoad) dialMore(r *reactor) {
	for l.inflight < maxInflightDials && l.nextDial < l.dialStop {
		id := l.nextDial
		c, err := r.dial(id)
		if err != nil {
			l.err = fmt.Errorf("dial session %d: %w", id, err)
			r.abort(l.err)
			return
		}
		l.conns[id] = c
		l.nextDial++
		l.inflight++
	}
}

func (l *sessionsLoad) connected(r *reactor, c *rconn) {
	c.t0 = r.tick()
	if l.monolock {
		_ = r.send(c, l.reqs[l.lock(c.id)])
	} else {
		_ = r.send(c, heartbeatFrame)
	}
}

func (l *sessionsLoad) frame(r *reactor, c *rconn, f *protocol.Frame) {
	now := r.tick()
	if f.Type == protocol.TypeError {
		l.err = fmt.Errorf("session %d: ERROR %#x %q", c.id, byte(f.Code), f.Reason)
		r.abort(l.err)
		return
	}
	first := !c.granted && c.flag == 0
	if first {
		c.flag = 1 // answered once
		l.inflight--
		l.ready++
		if l.monolock {
			l.checkState(r, c, f, now, true)
		}
		l.lastAck[c.id] = c.t0
		// The first heartbeat comes at a random point of the first interval
		// (earlier than the rule requires, never later), so that sessions
		// opened in one burst do not heartbeat in bursts ever after.
		r.after(c.t0+l.rng.Int64N(l.interval)+1, c, timerHeartbeat)
		if l.ready == l.dialStop && l.dialStop < l.s {
			l.dialStop = l.s // holders are in: now the waiters
		}
		if l.ready == l.s {
			l.allReady.Store(true)
		}
		l.dialMore(r)
		return
	}
	if !c.hbOut {
		if l.monolock && f.Type == protocol.TypeAcquired {
			l.checkState(r, c, f, now, false) // a pushed promotion
			return
		}
		l.err = fmt.Errorf("session %d: unsolicited frame %#x", c.id, byte(f.Type))
		r.abort(l.err)
		return
	}
	c.hbOut = false
	l.hbTotal++
	if now >= l.from.Load() && now < l.until.Load() {
		l.hbWindow++
		l.hist.Record(now - c.t0)
	}
	if l.monolock {
		l.checkState(r, c, f, now, false)
	}
	l.lastAck[c.id] = c.t0
	if c.flag == 2 { // the interval passed while this one was in flight
		c.flag = 1
		l.late++
		l.beat(r, c)
		return
	}
	r.after(c.t0+l.interval, c, timerHeartbeat)
}

// checkState checks a monolock answer: holders keep their token, waiters
// wait; a waiter granted means its holder was dropped, which the checker
// judges against the holder's last acknowledged heartbeat and the lease.
func (l *sessionsLoad) checkState(r *reactor, c *rconn, f *protocol.Frame, now int64, first bool) {
	lk := l.lock(c.id)
	switch {
	case f.Type == protocol.TypeAcquired && c.granted:
		if f.Token != c.token {
			l.chk.Report("session %d on %q: token changed from %d to %d", c.id, l.names[lk], c.token, f.Token)
		}
	case f.Type == protocol.TypeAcquired:
		if !l.holder(c.id) {
			l.promoted++
			h := lk
			l.chk.Lapse(l.names[lk], h, l.lastAck[h]+int64(l.lease))
		}
		c.granted, c.token = true, f.Token
		l.chk.Grant(l.names[lk], c.id, now, f.Token, true)
	case f.Type == protocol.TypeWaiting && c.granted:
		l.chk.Report("session %d on %q: WAITING after ACQUIRED", c.id, l.names[lk])
	case f.Type == protocol.TypeWaiting && first && l.holder(c.id):
		l.chk.Report("session %d on %q: a free lock answered WAITING", c.id, l.names[lk])
	}
}

func (l *sessionsLoad) beat(r *reactor, c *rconn) {
	c.t0 = r.tick()
	c.hbOut = true
	_ = r.send(c, heartbeatFrame)
}

func (l *sessionsLoad) timer(r *reactor, c *rconn, _ uint8) {
	if c.hbOut {
		c.flag = 2
		return
	}
	l.beat(r, c)
}

func (l *sessionsLoad) lost(r *reactor, c *rconn, err error) {
	l.lostConns++
	l.err = fmt.Errorf("session %d lost: %w", c.id, err)
	r.abort(l.err)
}
