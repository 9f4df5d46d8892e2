package eventloop

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/panjf2000/gnet/v2"
)

// Every other goroutine reaches the owner through call (requests from the
// admin API, health probes, shutdown) or through tick (the ticker).

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
	run := func(context.Context) error {
		if c.state.CompareAndSwap(callQueued, callRunning) {
			c.fn(s.handler.owner)
			close(c.done)
		}
		return nil
	}
	if err := s.execute(run); err != nil {
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
	}
}

// execute queues run on the loop.
func (s *Server) execute(run gnet.RunnableFunc) error {
	loop := s.handler.loop.Load()
	if loop == nil {
		return errNoLoop
	}
	return (*loop).Execute(context.Background(), run)
}

// tick hands the owner a tick of the timer wheel.
func (s *Server) tick() error { return s.execute(s.handler.tick) }
