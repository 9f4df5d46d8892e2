package scenario

import (
	"fmt"
	"time"

	"github.com/monolock/monolock/bench/check"
	"github.com/monolock/monolock/bench/clock"
	"github.com/monolock/monolock/bench/hist"
	"github.com/monolock/monolock/bench/reactor"
	"github.com/monolock/monolock/protocol"
)

// handoverLoad keeps n workers queued on one lock (S2). A worker that is
// granted the lock closes at once; the worker that held it before dials again
// and queues at the back. Handover latency runs from the holder's close to
// the next grant, both seen on this one loop.
//
// The previous holder re-dials only after the next grant is seen, so that
// its connect does not sit between the close and the grant being measured;
// n-2 waiters stay queued meanwhile. A holder closes at the end of the loop
// turn in which its grant arrived (see release).
type handoverLoad struct {
	reactor.Base
	n    int
	name string
	req  []byte
	chk  *check.Checker
	win  clock.Window

	lastClose int64           // when the last holder closed; 0 before the first
	pending   int             // worker to re-dial after the next grant; -1 for none
	holders   []*reactor.Conn // granted this loop turn, released at its end
	hist      hist.Histogram
	count     uint64
	nLost     int
	redial    []int
}

func newHandoverLoad(n int, name string, lease time.Duration, chk *check.Checker, win clock.Window) *handoverLoad {
	return &handoverLoad{
		n: n, name: name, chk: chk, win: win, pending: -1,
		req: protocol.AppendAcquire(nil, uint32(lease.Milliseconds()), name),
	}
}

func (l *handoverLoad) start(r *reactor.Reactor) {
	for i := range l.n {
		l.dial(r, i)
	}
}

func (l *handoverLoad) dial(r *reactor.Reactor, id int) {
	if _, err := r.Dial(id); err != nil {
		l.redial = append(l.redial, id)
	}
}

func (l *handoverLoad) Connected(r *reactor.Reactor, c *reactor.Conn) { _ = r.Send(c, l.req) }

func (l *handoverLoad) Frame(r *reactor.Reactor, c *reactor.Conn, f *protocol.Frame) {
	switch f.Type {
	case protocol.TypeWaiting:
		return
	case protocol.TypeAcquired:
	default:
		r.Abort(fmt.Errorf("unexpected frame %#x (code %#x %q)", byte(f.Type), byte(f.Code), f.Reason))
		return
	}
	now := r.Tick()
	l.chk.Grant(l.name, c.ID, now, f.Token, true)
	if l.lastClose > 0 && l.win.Has(now) {
		l.count++
		l.hist.Record(now - l.lastClose)
	}
	if now >= l.win.Until {
		r.Stop()
		return
	}
	// Release at the end of this loop turn rather than here: a grant that
	// arrived in the same batch of events, before the holder even closed,
	// is then seen by the checker as a second holder.
	l.holders = append(l.holders, c)
}

// release closes this turn's holders and re-dials the previous one.
func (l *handoverLoad) release(r *reactor.Reactor) {
	for _, c := range l.holders {
		l.chk.Release(l.name, c.ID)
		l.lastClose = r.Tick()
		r.Close(c)
		if l.pending >= 0 {
			l.dial(r, l.pending)
		}
		l.pending = c.ID
	}
	l.holders = l.holders[:0]
}

func (l *handoverLoad) Lost(r *reactor.Reactor, c *reactor.Conn, err error) {
	l.nLost++
	if l.nLost > maxLost {
		r.Abort(fmt.Errorf("%d connections lost, last: %w", l.nLost, err))
		return
	}
	l.chk.Release(l.name, c.ID)
	l.redial = append(l.redial, c.ID)
}

func (l *handoverLoad) Idle(r *reactor.Reactor) {
	l.release(r)
	if r.Now() >= l.win.Until {
		r.Stop()
		return
	}
	// Nobody else queued (a lost waiter, or n = 1): re-dial anyway.
	if l.pending >= 0 && r.Now()-l.lastClose > int64(50*time.Millisecond) {
		l.dial(r, l.pending)
		l.pending = -1
	}
	if len(l.redial) > 0 {
		ids := l.redial
		l.redial = nil
		for _, id := range ids {
			l.dial(r, id)
		}
	}
}
