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

// maxLost is how many unexpected connection losses a timed load tolerates
// before it gives up (a dead server, a descriptor shortage).
const maxLost = 50

// cycleMode is what one cycle of a cycleLoad does.
type cycleMode uint8

const (
	// cycleAcquire: dial, ACQUIRE the worker's own lock, ACQUIRED, close (S1).
	cycleAcquire cycleMode = iota
	// cycleRequest: dial, send 1 byte, read the 9-byte answer, close (S0 floor of S1).
	cycleRequest
	// cycleConnect: dial, and close as soon as the connect completes (S0).
	cycleConnect
)

// cycleLoad keeps C workers cycling through short connections.
type cycleLoad struct {
	reactor.Base
	mode    cycleMode
	workers int
	names   []string
	reqs    [][]byte
	chk     *check.Checker
	win     clock.Window

	hist    hist.Histogram
	count   uint64 // cycles completed inside the window
	waited  uint64 // ACQUIRE answered WAITING (the previous cycle's close not yet seen)
	nLost   int
	lastErr error
	redial  []int
	holders []*reactor.Conn // granted this loop turn, released at its end
}

func newCycleLoad(mode cycleMode, workers int, lease time.Duration, prefix string, chk *check.Checker, win clock.Window) *cycleLoad {
	l := &cycleLoad{mode: mode, workers: workers, chk: chk, win: win}
	if mode == cycleAcquire {
		for i := range workers {
			name := fmt.Sprintf("%s-%d", prefix, i)
			l.names = append(l.names, name)
			l.reqs = append(l.reqs, protocol.AppendAcquire(nil, uint32(lease.Milliseconds()), name))
		}
	}
	return l
}

var heartbeatFrame = []byte{byte(protocol.TypeHeartbeat)}

func (l *cycleLoad) start(r *reactor.Reactor) {
	for i := range l.workers {
		l.dial(r, i)
	}
}

func (l *cycleLoad) dial(r *reactor.Reactor, id int) {
	t := r.Tick()
	c, err := r.Dial(id)
	if err != nil {
		l.lastErr = err
		l.redial = append(l.redial, id)
		return
	}
	c.T0 = t
}

func (l *cycleLoad) Connected(r *reactor.Reactor, c *reactor.Conn) {
	switch l.mode {
	case cycleAcquire:
		_ = r.Send(c, l.reqs[c.ID])
	case cycleRequest:
		_ = r.Send(c, heartbeatFrame)
	case cycleConnect:
		r.Close(c)
		l.done(r, c, r.Tick())
	}
}

func (l *cycleLoad) Frame(r *reactor.Reactor, c *reactor.Conn, f *protocol.Frame) {
	switch f.Type {
	case protocol.TypeWaiting:
		l.waited++
		return
	case protocol.TypeAcquired:
	default:
		r.Abort(fmt.Errorf("unexpected frame %#x (code %#x %q)", byte(f.Type), byte(f.Code), f.Reason))
		return
	}
	if l.mode == cycleAcquire {
		now := r.Tick()
		name := l.names[c.ID]
		l.chk.Grant(name, c.ID, now, f.Token, true)
		// Release at the end of the loop turn, as S2 does (see handoverLoad).
		l.holders = append(l.holders, c)
		return
	}
	r.Close(c)
	l.done(r, c, r.Tick())
}

// done ends a cycle at time now and starts the next.
func (l *cycleLoad) done(r *reactor.Reactor, c *reactor.Conn, now int64) {
	if l.win.Has(now) {
		l.count++
		l.hist.Record(now - c.T0)
	}
	if now >= l.win.Until {
		r.Stop()
		return
	}
	l.dial(r, c.ID)
}

func (l *cycleLoad) Lost(r *reactor.Reactor, c *reactor.Conn, err error) {
	l.nLost++
	l.lastErr = err
	if l.nLost > maxLost {
		r.Abort(fmt.Errorf("%d connections lost, last: %w", l.nLost, err))
		return
	}
	if l.mode == cycleAcquire {
		l.chk.Release(l.names[c.ID], c.ID)
	}
	l.redial = append(l.redial, c.ID)
}

func (l *cycleLoad) Idle(r *reactor.Reactor) {
	for _, c := range l.holders {
		l.chk.Release(l.names[c.ID], c.ID)
		r.Close(c)
		l.done(r, c, r.Tick())
	}
	l.holders = l.holders[:0]
	if r.Now() >= l.win.Until {
		r.Stop()
		return
	}
	if len(l.redial) > 0 {
		ids := l.redial
		l.redial = nil
		for _, id := range ids {
			l.dial(r, id)
		}
	}
}

// echoLoad keeps conns persistent connections each sending one byte and
// waiting for the 9-byte answer (S0's round trip).
type echoLoad struct {
	reactor.Base
	conns int
	win   clock.Window
	hist  hist.Histogram
	count uint64
}

func (l *echoLoad) start(r *reactor.Reactor) {
	for i := range l.conns {
		if _, err := r.Dial(i); err != nil {
			r.Abort(err)
			return
		}
	}
}

func (l *echoLoad) Connected(r *reactor.Reactor, c *reactor.Conn) {
	c.T0 = r.Tick()
	_ = r.Send(c, heartbeatFrame)
}

func (l *echoLoad) Frame(r *reactor.Reactor, c *reactor.Conn, _ *protocol.Frame) {
	now := r.Tick()
	if l.win.Has(now) {
		l.count++
		l.hist.Record(now - c.T0)
	}
	if now >= l.win.Until {
		r.Stop()
		return
	}
	c.T0 = now
	_ = r.Send(c, heartbeatFrame)
}

func (l *echoLoad) Lost(r *reactor.Reactor, _ *reactor.Conn, err error) {
	r.Abort(fmt.Errorf("echo connection lost: %w", err))
}

func (l *echoLoad) Idle(r *reactor.Reactor) {
	if r.Now() >= l.win.Until {
		r.Stop()
	}
}
