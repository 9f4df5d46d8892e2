package eventloop

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/monolock/monolock/protocol"
)

// handler adapts gnet's callbacks to the owner. Every callback except OnTick
// runs on the event loop.
type handler struct {
	gnet.BuiltinEventEngine
	owner *owner

	// Set on the loop and read by the ticker goroutine.
	loop     atomic.Pointer[gnet.EventLoop] // published when the control connection opens
	sessions atomic.Int64                   // open sessions; no ticks while there are none
	tickDue  atomic.Bool                    // a tick is queued on the loop and has not run
	tick     gnet.RunnableFunc
}

// control marks the connection that gives the server a handle on the loop.
type control struct{}

func newHandler(o *owner) *handler {
	h := &handler{owner: o}
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
	h.sessions.Add(1)
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

// OnTick runs on gnet's ticker goroutine, not the loop: it only hands a tick
// to the loop, and at most one at a time.
func (h *handler) OnTick() (time.Duration, gnet.Action) {
	if loop := h.loop.Load(); loop != nil && h.sessions.Load() > 0 && h.tickDue.CompareAndSwap(false, true) {
		if err := (*loop).Execute(context.Background(), h.tick); err != nil {
			h.tickDue.Store(false)
		}
	}
	return wheelTick, gnet.None
}
