package eventloop

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
)

// This file is the control connection: how every other goroutine reaches
// the loop.
//
// Every other goroutine reaches the owner through call (requests from the
// admin API, health probes, shutdown) or through tick (the ticker). Both go
// through a queue of ours that the loop serves when the control connection
// is readable: a socket event like any other. One such event serves the tick
// and at most callsPerTurn calls; if more wait, the loop writes the control
// connection a byte and goes back to epoll first, so every socket that is
// ready meanwhile is served before the next slice of calls.
//
// gnet's Execute would not do: its tasks land in a queue that the loop
// drains, tasks added meanwhile included, before it polls again, so a steady
// stream of calls (a dashboard polling a busy lock) kept every socket waiting.

// callsPerTurn bounds the calls served between two polls of the sockets.
// Each call is itself a bounded slice (see snapshotTurn), so one turn of
// call work takes well under a millisecond.
const callsPerTurn = 4

// maxQueuedCalls bounds the calls waiting for the loop. Callers are few (the
// admin and health endpoints cap their connections); the bound keeps a bug
// or a flood from growing the queue without limit.
const maxQueuedCalls = 4096

// control marks the connection that gives the server a handle on the loop.
type control struct{}

var errNoLoop = errors.New("the event loop is not running")

var errCallQueueFull = errors.New("too many requests are waiting for the event loop; retry shortly")

// A loopCall is one function queued for the loop. Its state decides, once,
// whether it runs or is withdrawn.
type loopCall struct {
	fn    func(*owner)
	state atomic.Int32
	done  chan struct{} // closed when fn has returned
}

const (
	callQueued int32 = iota
	callRunning
	callWithdrawn
)

// callQueue is what other goroutines hand the loop: calls in FIFO order and
// at most one pending tick.
type callQueue struct {
	mu    sync.Mutex
	calls []*loopCall
	tick  bool
	woken bool // a wake-up byte is on its way to the loop
	gone  bool // the loop has stopped: nothing will be served
	wake  func()

	stopped chan struct{} // closed with gone, for callers still waiting

	served [callsPerTurn]*loopCall // the loop's batch; only the loop touches it
}

// push queues c and wakes the loop unless a wake-up is already on its way.
func (q *callQueue) push(c *loopCall) error {
	q.mu.Lock()
	switch {
	case q.gone:
		q.mu.Unlock()
		return errNoLoop
	case len(q.calls) >= maxQueuedCalls:
		q.mu.Unlock()
		return errCallQueueFull
	}
	q.calls = append(q.calls, c)
	wake := q.arm()
	q.mu.Unlock()
	if wake {
		q.wake()
	}
	return nil
}

// pushTick asks the loop for a tick.
func (q *callQueue) pushTick() error {
	q.mu.Lock()
	if q.gone {
		q.mu.Unlock()
		return errNoLoop
	}
	q.tick = true
	wake := q.arm()
	q.mu.Unlock()
	if wake {
		q.wake()
	}
	return nil
}

// arm reports whether the caller must send a wake-up; q.mu is held.
func (q *callQueue) arm() bool {
	if q.woken {
		return false
	}
	q.woken = true
	return true
}

func newCallQueue(wake func()) *callQueue {
	return &callQueue{wake: wake, stopped: make(chan struct{})}
}

// stop marks the loop gone: later pushes fail at once, and callers whose
// calls are still queued give up.
func (q *callQueue) stop() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.gone {
		q.gone = true
		close(q.stopped)
	}
}

// turn runs on the loop when the control connection is readable: the tick,
// if one is pending, then at most callsPerTurn calls. It wakes the loop
// again when work is left, so the rest is served after the next poll.
func (q *callQueue) turn(tick func(), run func(*loopCall)) {
	q.mu.Lock()
	q.woken = false
	ticking := q.tick
	q.tick = false
	n := 0
	for n < len(q.served) && len(q.calls) > 0 {
		c := q.calls[0]
		q.calls[0] = nil
		q.calls = q.calls[1:]
		if c.state.Load() == callWithdrawn { // its caller gave up; costs nothing
			continue
		}
		q.served[n] = c
		n++
	}
	if len(q.calls) == 0 {
		q.calls = q.calls[:0:0] // let go of a long backing array
	}
	q.mu.Unlock()

	if ticking {
		tick()
	}
	for i, c := range q.served[:n] {
		q.served[i] = nil
		run(c)
	}

	q.mu.Lock()
	wake := (len(q.calls) > 0 || q.tick) && q.arm()
	q.mu.Unlock()
	if wake {
		q.wake()
	}
}

// call runs fn on the event loop and waits for it. Either fn runs and call
// returns nil, or call returns an error and fn never runs: when ctx ends
// while fn is still queued, fn is withdrawn. Once fn has started, call waits
// for it to return, which is soon (fn is a bounded slice of work), so that
// no result is read while the loop is still writing it, and no action is
// reported as failed that in fact happened.
func (s *Server) call(ctx context.Context, fn func(*owner)) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("run on event loop: %w", err)
	}
	c := &loopCall{fn: fn, done: make(chan struct{})}
	if err := s.calls.push(c); err != nil {
		return fmt.Errorf("run on event loop: %w", err)
	}
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		if c.state.CompareAndSwap(callQueued, callWithdrawn) {
			return fmt.Errorf("run on event loop: %w", ctx.Err())
		}
		<-c.done
		return nil
	case <-s.calls.stopped:
		if c.state.CompareAndSwap(callQueued, callWithdrawn) {
			return fmt.Errorf("run on event loop: %w", errNoLoop)
		}
		<-c.done
		return nil
	}
}

// runCall runs a queued call on the loop, as a turn of its own, unless its
// caller withdrew it. The caller learns the result once the turn's effects
// are applied: a force-released holder is closed, its successor told.
func (o *owner) runCall(c *loopCall) {
	if c.state.CompareAndSwap(callQueued, callRunning) {
		o.begin()
		c.fn(o)
		o.end(nil)
		close(c.done)
	}
}

// tick hands the owner a tick of the timer wheel.
func (s *Server) tick() error { return s.calls.pushTick() }

// openControl enrolls one end of a socket pair into the loop. gnet hands out
// its EventLoop only through a connection, and the server needs it to run
// ticks and requests on the loop before any client connects.
func (s *Server) openControl() error {
	inner, outer, err := socketPair()
	if err != nil {
		return fmt.Errorf("control %w", err)
	}
	if _, err := s.engine.EnrollContext(inner, control{}); err != nil {
		_ = outer.Close()
		return fmt.Errorf("enroll control connection: %w", err)
	}
	s.ctlPeer = outer
	if s.handler.loop.Load() == nil {
		return errors.New("control connection opened without an event loop")
	}
	return nil
}

// wakeByte is what the control connection carries: its arrival, not its
// value, tells the loop to serve its call queue.
var wakeByte = []byte{1}

// wakeLoop makes the control connection readable. At most a byte or two are
// ever unread (see callQueue.arm), so the write never waits.
func (s *Server) wakeLoop() {
	if _, err := s.ctlPeer.Write(wakeByte); err != nil {
		s.log.Debug().Err(err).Msg("cannot wake the event loop; it has stopped")
	}
}

// socketPair returns two connected stream sockets as net.Conns: the inner
// end for the loop to enroll, the outer one for the server to keep. The
// control connection uses it.
func socketPair() (inner, outer net.Conn, err error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socket pair: %w", err)
	}
	conns := make([]net.Conn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "monolock-socket-pair")
		conns[i], err = net.FileConn(f)
		_ = f.Close()
		if err != nil {
			for _, c := range conns[:i] {
				_ = c.Close()
			}
			if i == 0 {
				_ = syscall.Close(fds[1])
			}
			return nil, nil, fmt.Errorf("socket pair: %w", err)
		}
	}
	return conns[0], conns[1], nil
}
