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

	loop atomic.Pointer[gnet.EventLoop] // published when the control connection opens
	tick gnet.RunnableFunc
}

// control marks the connection that gives the server a handle on the loop.
type control struct{}

func newHandler(o *owner) *handler {
	h := &handler{owner: o}
	h.tick = func(context.Context) error {
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
	}
	return gnet.None
}

// tickLoop runs on its own goroutine, not the loop. It sleeps until the
// owner's next wake-up (see wakeup.go), hands the loop a tick, and waits for
// the tick to plan the next one; a deadline earlier than planned wakes it to
// re-plan. A server with no timers due soon costs no CPU, while expiry keeps
// the wheel's 1 ms precision.
func (h *handler) tickLoop(stop <-chan struct{}) {
	w := &h.owner.wakeup
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		var fire <-chan time.Time
		if at, ok := w.planned(); ok {
			timer.Reset(at - h.owner.now())
			fire = timer.C
		}
		select {
		case <-fire:
			if loop := h.loop.Load(); loop != nil && (*loop).Execute(context.Background(), h.tick) == nil {
				select { // the tick re-plans when it is done
				case <-w.replan:
				case <-stop:
					return
				}
			}
		case <-w.replan:
			timer.Stop()
		case <-stop:
			return
		}
	}
}
