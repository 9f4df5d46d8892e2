package scenario

import (
	"errors"
	"fmt"
	"time"

	"github.com/monolock/monolock/bench/check"
	"github.com/monolock/monolock/bench/clock"
	"github.com/monolock/monolock/bench/peers"
	"github.com/monolock/monolock/bench/reactor"
	"github.com/monolock/monolock/protocol"
)

// expiryCase is one repetition of S4: a holder that heartbeats HolderBeats
// times and then goes silent (socket open, nothing sent), and one waiter.
type expiryCase struct {
	lease time.Duration
	name  string
	req   []byte

	lastBeat int64 // send time of the holder's last acknowledged heartbeat
	silent   bool  // the holder stopped heartbeating
	beatsOut int
	grantAt  int64 // the waiter's grant; 0 before
	dropAt   int64 // the holder's connection closed by the server; 0 before
	holder   *reactor.Conn
	waiter   *reactor.Conn
	done     bool
}

// Overshoot is how long after the earliest legal moment the waiter was
// granted: grant − (last heartbeat + lease).
func (c *expiryCase) Overshoot() time.Duration {
	return time.Duration(c.grantAt - c.lastBeat - int64(c.lease))
}

// expiryLoad runs every case at once on one loop (each on its own lock).
type expiryLoad struct {
	cases    []*expiryCase
	chk      *check.Checker
	deadline int64
	left     int
	err      error
}

func newExpiryLoad(clk clock.Clock, leases []time.Duration, reps int, chk *check.Checker) *expiryLoad {
	l := &expiryLoad{chk: chk}
	var longest time.Duration
	for _, lease := range leases {
		for i := range reps {
			name := fmt.Sprintf("s4-%v-%d", lease, i)
			l.cases = append(l.cases, &expiryCase{
				lease: lease, name: name,
				req: protocol.AppendAcquire(nil, uint32(lease.Milliseconds()), name),
			})
			longest = max(longest, lease)
		}
	}
	l.left = len(l.cases)
	l.deadline = clk.Now() + int64(3*longest+10*time.Second)
	return l
}

// ids: the holder of case k is 2k, its waiter 2k+1.
func (l *expiryLoad) ofConn(c *reactor.Conn) (*expiryCase, bool) { return l.cases[c.ID/2], c.ID%2 == 0 }

func (l *expiryLoad) start(r *reactor.Reactor) {
	for k, ec := range l.cases {
		c, err := r.Dial(2 * k)
		if err != nil {
			r.Abort(err)
			return
		}
		ec.holder = c
	}
}

func (l *expiryLoad) Connected(r *reactor.Reactor, c *reactor.Conn) {
	ec, _ := l.ofConn(c)
	c.T0 = r.Tick()
	_ = r.Send(c, ec.req)
}

func (l *expiryLoad) Frame(r *reactor.Reactor, c *reactor.Conn, f *protocol.Frame) {
	now := r.Tick()
	ec, isHolder := l.ofConn(c)
	if f.Type == protocol.TypeError {
		l.fail(r, fmt.Errorf("%s: ERROR %#x %q", ec.name, byte(f.Code), f.Reason))
		return
	}
	interval := int64(ec.lease / 4)
	if isHolder {
		switch {
		case f.Type != protocol.TypeAcquired:
			l.fail(r, fmt.Errorf("%s: the holder was answered %#x", ec.name, byte(f.Type)))
		case !c.Granted: // the grant
			c.Granted, c.Token = true, f.Token
			l.chk.Grant(ec.name, c.ID, now, f.Token, true)
			ec.lastBeat = c.T0
			ec.beatsOut = peers.HolderBeats
			r.After(c.T0+interval, c, timerHeartbeat)
			w, err := r.Dial(c.ID + 1)
			if err != nil {
				l.fail(r, err)
				return
			}
			ec.waiter = w
		default: // a heartbeat answered
			c.HbOut = false
			ec.lastBeat = c.T0
			if ec.beatsOut > 0 {
				r.After(c.T0+interval, c, timerHeartbeat)
				return
			}
			ec.silent = true
			l.chk.Lapse(ec.name, c.ID, ec.lastBeat+int64(ec.lease))
		}
		return
	}
	// The waiter.
	c.HbOut = false
	if f.Type == protocol.TypeWaiting {
		r.After(c.T0+interval, c, timerHeartbeat)
		return
	}
	if ec.grantAt != 0 {
		return
	}
	ec.grantAt = now
	l.chk.Grant(ec.name, c.ID, now, f.Token, true)
	if !ec.silent {
		l.chk.Report("%s: the waiter was granted while the holder still heartbeated", ec.name)
	}
	r.Close(c)
	l.finish(r, ec)
}

func (l *expiryLoad) Timer(r *reactor.Reactor, c *reactor.Conn, _ uint8) {
	ec, isHolder := l.ofConn(c)
	if ec.done || c.HbOut {
		return
	}
	if isHolder {
		if ec.beatsOut == 0 {
			return
		}
		ec.beatsOut--
	}
	c.T0 = r.Tick()
	c.HbOut = true
	_ = r.Send(c, heartbeatFrame)
}

func (l *expiryLoad) Lost(r *reactor.Reactor, c *reactor.Conn, err error) {
	ec, isHolder := l.ofConn(c)
	now := r.Tick()
	if !isHolder || !errors.Is(err, reactor.ErrPeerClosed) {
		l.fail(r, fmt.Errorf("%s: connection lost: %w", ec.name, err))
		return
	}
	ec.dropAt = now
	switch {
	case !ec.silent:
		l.chk.Report("%s: the holder was dropped while it still heartbeated", ec.name)
	case now < ec.lastBeat+int64(ec.lease):
		l.chk.Report("%s: the holder was dropped %v before its lease ended", ec.name, time.Duration(ec.lastBeat+int64(ec.lease)-now))
	}
	l.finish(r, ec)
}

// finish marks a case done once the waiter is granted and the holder gone.
func (l *expiryLoad) finish(r *reactor.Reactor, ec *expiryCase) {
	if ec.done || ec.grantAt == 0 || ec.dropAt == 0 {
		return
	}
	ec.done = true
	l.left--
	if l.left == 0 {
		r.Stop()
	}
}

func (l *expiryLoad) fail(r *reactor.Reactor, err error) {
	if l.err == nil {
		l.err = err
	}
	r.Abort(err)
}

func (l *expiryLoad) Idle(r *reactor.Reactor) {
	if r.Now() > l.deadline {
		l.fail(r, fmt.Errorf("S4: %d of %d cases unfinished at the deadline", l.left, len(l.cases)))
	}
}
