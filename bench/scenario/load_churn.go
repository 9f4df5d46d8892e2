package scenario

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/monolock/monolock/bench/check"
	"github.com/monolock/monolock/bench/reactor"
	"github.com/monolock/monolock/protocol"
)

// churnLoad is S5 on one lock: a holder, w waiters queued behind it, and a
// sentinel queued last. On go it closes the w waiters in random order, then
// the holder; the sentinel can only be granted once every waiter ahead of it
// has left the queue, so its grant marks the end of the departures.
//
// ids: 0 is the holder, 1..w the waiters, w+1 the sentinel.
type churnLoad struct {
	reactor.Base
	w    int
	name string
	req  []byte
	chk  *check.Checker
	rng  *rand.Rand

	conns    []*reactor.Conn
	nextDial int
	inflight int
	queued   int // waiters answered WAITING

	churnSignals // ready: everyone queued; done: the sentinel's grant
}

// churnSignals is what an S5 load and its driver (runChurn) tell each other,
// and the span the load measures.
type churnSignals struct {
	ready atomic.Bool // everyone in place: the driver may sample and say go
	goNow atomic.Bool // set by the driver
	fired bool
	done  atomic.Bool // the sentinel was answered

	t0, tEnd int64 // first close; the sentinel's answer
	err      error
}

// departOnGo, once the driver has said go and only the first time, closes
// conns in random order, from t0 on; it reports whether it did.
func (s *churnSignals) departOnGo(r *reactor.Reactor, rng *rand.Rand, conns []*reactor.Conn) bool {
	if s.fired || !s.goNow.Load() {
		return false
	}
	s.fired = true
	order := slices.Clone(conns)
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	s.t0 = r.Tick()
	for _, c := range order {
		r.Close(c)
	}
	return true
}

func (s *churnSignals) fail(r *reactor.Reactor, err error) {
	if s.err == nil {
		s.err = err
	}
	r.Abort(err)
}

func newChurnLoad(w int, name string, seed uint64, chk *check.Checker) *churnLoad {
	return &churnLoad{
		w: w, name: name, chk: chk, rng: rand.New(rand.NewPCG(seed, uint64(w))),
		req:   protocol.AppendAcquire(nil, uint32((10 * time.Minute).Milliseconds()), name),
		conns: make([]*reactor.Conn, w+2),
	}
}

func (l *churnLoad) start(r *reactor.Reactor) { l.dialOne(r, 0) }

func (l *churnLoad) dialOne(r *reactor.Reactor, id int) {
	c, err := r.Dial(id)
	if err != nil {
		l.fail(r, fmt.Errorf("dial %d: %w", id, err))
		return
	}
	l.conns[id] = c
	l.inflight++
}

// dialWaiters keeps up to maxInflightDials waiters connecting.
func (l *churnLoad) dialWaiters(r *reactor.Reactor) {
	for l.inflight < maxInflightDials && l.nextDial <= l.w {
		l.dialOne(r, l.nextDial)
		l.nextDial++
	}
}

func (l *churnLoad) Connected(r *reactor.Reactor, c *reactor.Conn) { _ = r.Send(c, l.req) }

func (l *churnLoad) Frame(r *reactor.Reactor, c *reactor.Conn, f *protocol.Frame) {
	now := r.Tick()
	switch {
	case f.Type == protocol.TypeAcquired && c.ID == 0:
		l.inflight--
		c.Granted = true
		l.chk.Grant(l.name, 0, now, f.Token, true)
		l.nextDial = 1
		l.dialWaiters(r)
	case f.Type == protocol.TypeWaiting && c.ID <= l.w:
		l.inflight--
		l.queued++
		if l.queued == l.w {
			l.dialOne(r, l.w+1)
		} else {
			l.dialWaiters(r)
		}
	case f.Type == protocol.TypeWaiting && c.ID == l.w+1:
		l.inflight--
		l.ready.Store(true)
	case f.Type == protocol.TypeAcquired && c.ID == l.w+1 && l.fired:
		l.tEnd = now
		l.chk.Grant(l.name, c.ID, now, f.Token, true)
		l.chk.Release(l.name, c.ID)
		r.Close(c)
		l.done.Store(true)
		r.Stop()
	default:
		l.fail(r, fmt.Errorf("S5: connection %d answered %#x (code %#x %q)", c.ID, byte(f.Type), byte(f.Code), f.Reason))
	}
}

func (l *churnLoad) Idle(r *reactor.Reactor) {
	if l.departOnGo(r, l.rng, l.conns[1:l.w+1]) { // the waiters
		l.chk.Release(l.name, 0)
		r.Close(l.conns[0])
	}
}

func (l *churnLoad) Lost(r *reactor.Reactor, c *reactor.Conn, err error) {
	l.fail(r, fmt.Errorf("S5: connection %d lost: %w", c.ID, err))
}

// floorChurnLoad is S5's floor: w connections to the bare gnet server, each
// answered once (so the server has accepted and registered it), closed in
// random order; then a sentinel connection sends a byte and waits for the
// answer. gnet handles the events of one epoll batch in order, so the answer
// comes after the closes the server had been told of; the driver then
// samples the server's CPU once it has gone quiet. ids: 0..w-1 the
// connections, w the sentinel.
type floorChurnLoad struct {
	reactor.Base
	w   int
	rng *rand.Rand

	conns    []*reactor.Conn
	nextDial int
	inflight int
	answered int

	churnSignals // ready: every connection answered; done: the sentinel's answer
}

func newFloorChurnLoad(w int, seed uint64) *floorChurnLoad {
	return &floorChurnLoad{w: w, rng: rand.New(rand.NewPCG(seed, uint64(w))), conns: make([]*reactor.Conn, w+1)}
}

func (l *floorChurnLoad) start(r *reactor.Reactor) { l.dialMore(r) }

func (l *floorChurnLoad) dialMore(r *reactor.Reactor) {
	for l.inflight < maxInflightDials && l.nextDial <= l.w {
		c, err := r.Dial(l.nextDial)
		if err != nil {
			l.fail(r, err)
			return
		}
		l.conns[l.nextDial] = c
		l.nextDial++
		l.inflight++
	}
}

func (l *floorChurnLoad) Connected(r *reactor.Reactor, c *reactor.Conn) {
	_ = r.Send(c, heartbeatFrame)
}

func (l *floorChurnLoad) Frame(r *reactor.Reactor, c *reactor.Conn, _ *protocol.Frame) {
	if l.fired {
		if c.ID == l.w {
			l.tEnd = r.Tick()
			l.done.Store(true)
			r.Stop()
		}
		return
	}
	l.inflight--
	l.answered++
	if l.answered == l.w+1 {
		l.ready.Store(true)
		return
	}
	l.dialMore(r)
}

func (l *floorChurnLoad) Idle(r *reactor.Reactor) {
	if l.departOnGo(r, l.rng, l.conns[:l.w]) {
		_ = r.Send(l.conns[l.w], heartbeatFrame) // the sentinel
	}
}

func (l *floorChurnLoad) Lost(r *reactor.Reactor, c *reactor.Conn, err error) {
	l.fail(r, fmt.Errorf("S5 floor: connection %d lost: %w", c.ID, err))
}
