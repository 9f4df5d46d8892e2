package main

import (
	"fmt"
	"time"

	"github.com/monolock/monolock/protocol"
)

// window is the part of a timed run that counts: [from, until) in monotonic ns.
type window struct{ from, until int64 }

func (w window) has(t int64) bool { return t >= w.from && t < w.until }
func (w window) seconds() float64 { return float64(w.until-w.from) / 1e9 }

// newWindow starts counting after warm and counts for dur.
func newWindow(warm, dur time.Duration) window {
	from := mono() + int64(warm)
	return window{from: from, until: from + int64(dur)}
}

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
	baseWorkload
	mode    cycleMode
	workers int
	names   []string
	reqs    [][]byte
	chk     *Checker
	win     window

	hist    Histogram
	count   uint64 // cycles completed inside the window
	waited  uint64 // ACQUIRE answered WAITING (the previous cycle's close not yet seen)
	nLost   int
	lastErr error
	redial  []int
	holders []*rconn // granted this loop turn, released at its end
}

func newCycleLoad(mode cycleMode, workers int, lease time.Duration, prefix string, chk *Checker, win window) *cycleLoad {
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

func (l *cycleLoad) start(r *reactor) {
	for i := range l.workers {
		l.dial(r, i)
	}
}

func (l *cycleLoad) dial(r *reactor, id int) {
	t := r.tick()
	c, err := r.dial(id)
	if err != nil {
		l.lastErr = err
		l.redial = append(l.redial, id)
		return
	}
	c.t0 = t
}

func (l *cycleLoad) connected(r *reactor, c *rconn) {
	switch l.mode {
	case cycleAcquire:
		_ = r.send(c, l.reqs[c.id])
	case cycleRequest:
		_ = r.send(c, heartbeatFrame)
	case cycleConnect:
		r.close(c)
		l.done(r, c, r.tick())
	}
}

func (l *cycleLoad) frame(r *reactor, c *rconn, f *protocol.Frame) {
	switch f.Type {
	case protocol.TypeWaiting:
		l.waited++
		return
	case protocol.TypeAcquired:
	default:
		r.abort(fmt.Errorf("unexpected frame %#x (code %#x %q)", byte(f.Type), byte(f.Code), f.Reason))
		return
	}
	if l.mode == cycleAcquire {
		now := r.tick()
		name := l.names[c.id]
		l.chk.Grant(name, c.id, now, f.Token, true)
		// Release at the end of the loop turn, as S2 does (see handoverLoad).
		l.holders = append(l.holders, c)
		return
	}
	r.close(c)
	l.done(r, c, r.tick())
}

// done ends a cycle at time now and starts the next.
func (l *cycleLoad) done(r *reactor, c *rconn, now int64) {
	if l.win.has(now) {
		l.count++
		l.hist.Record(now - c.t0)
	}
	if now >= l.win.until {
		r.Stop()
		return
	}
	l.dial(r, c.id)
}

func (l *cycleLoad) lost(r *reactor, c *rconn, err error) {
	l.nLost++
	l.lastErr = err
	if l.nLost > maxLost {
		r.abort(fmt.Errorf("%d connections lost, last: %w", l.nLost, err))
		return
	}
	if l.mode == cycleAcquire {
		l.chk.Release(l.names[c.id], c.id)
	}
	l.redial = append(l.redial, c.id)
}

func (l *cycleLoad) idle(r *reactor) {
	for _, c := range l.holders {
		l.chk.Release(l.names[c.id], c.id)
		r.close(c)
		l.done(r, c, r.tick())
	}
	l.holders = l.holders[:0]
	if r.now >= l.win.until {
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
	baseWorkload
	conns int
	win   window
	hist  Histogram
	count uint64
}

func (l *echoLoad) start(r *reactor) {
	for i := range l.conns {
		if _, err := r.dial(i); err != nil {
			r.abort(err)
			return
		}
	}
}

func (l *echoLoad) connected(r *reactor, c *rconn) {
	c.t0 = r.tick()
	_ = r.send(c, heartbeatFrame)
}

func (l *echoLoad) frame(r *reactor, c *rconn, _ *protocol.Frame) {
	now := r.tick()
	if l.win.has(now) {
		l.count++
		l.hist.Record(now - c.t0)
	}
	if now >= l.win.until {
		r.Stop()
		return
	}
	c.t0 = now
	_ = r.send(c, heartbeatFrame)
}

func (l *echoLoad) lost(r *reactor, _ *rconn, err error) {
	r.abort(fmt.Errorf("echo connection lost: %w", err))
}

func (l *echoLoad) idle(r *reactor) {
	if r.now >= l.win.until {
		r.Stop()
	}
}
