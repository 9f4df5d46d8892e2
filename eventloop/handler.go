package eventloop

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/monolock/monolock/protocol"
)

// handler adapts gnet's callbacks to the owner. Every callback runs on the
// event loop; the fields below it are shared with the ticker goroutine.
type handler struct {
	gnet.BuiltinEventEngine
	owner *owner

	loop     atomic.Pointer[gnet.EventLoop] // published when the control connection opens
	sessions atomic.Int64                   // open sessions; no ticks while there are none
	wake     chan struct{}                  // cap 1: the first session arrived, resume ticking
	tickDue  atomic.Bool                    // a tick is queued on the loop and has not run
	tick     gnet.RunnableFunc
}

// control marks the connection that gives the server a handle on the loop.
type control struct{}

func newHandler(o *owner) *handler {
	h := &handler{owner: o, wake: make(chan struct{}, 1)}
	h.tick = func(context.Context) error {
		h.tickDue.Store(false)
		o.advance()
		return nil
	}
	return h
}

func (h *handler) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	if _, ok := c.Context().(control); ok {
		loop := c.EventLoop()
		h.loop.Store(&loop)
		return nil, gnet.None
	}
	if h.owner.shuttingDown { // a TLS handshake that finished during shutdown
		return protocol.AppendError(nil, protocol.CodeShuttingDown, shuttingDownReason), gnet.Close
	}
	if p, ok := c.Context().(*peer); ok { // bridged from TLS
		h.owner.open(c, p)
	} else {
		h.owner.open(c, nil)
	}
	if h.sessions.Add(1) == 1 {
		select {
		case h.wake <- struct{}{}:
		default:
		}
	}
	return nil, gnet.None
}

func (h *handler) OnTraffic(c gnet.Conn) gnet.Action {
	s, ok := c.Context().(*session)
	if !ok {
		_, _ = c.Discard(-1)
		return gnet.None
	}
	return h.owner.traffic(s)
}

func (h *handler) OnClose(c gnet.Conn, _ error) gnet.Action {
	if s, ok := c.Context().(*session); ok {
		h.owner.onClose(s)
		h.sessions.Add(-1)
	}
	return gnet.None
}

// tickLoop runs on its own goroutine, not the loop: every wheelTick it hands
// the loop a tick, at most one at a time, and while there are no sessions it
// sleeps until the first one arrives. (gnet's own ticker cannot be paused, and
// a 1 ms tick costs an idle server a few percent of a core.)
func (h *handler) tickLoop(stop <-chan struct{}) {
	ticker := time.NewTicker(wheelTick)
	defer ticker.Stop()
	for {
		if h.sessions.Load() == 0 {
			select {
			case <-h.wake:
			case <-stop:
				return
			}
		}
		select {
		case <-ticker.C:
		case <-stop:
			return
		}
		if loop := h.loop.Load(); loop != nil && h.tickDue.CompareAndSwap(false, true) {
			if err := (*loop).Execute(context.Background(), h.tick); err != nil {
				h.tickDue.Store(false)
			}
		}
	}
}
