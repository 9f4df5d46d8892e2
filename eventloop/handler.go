package eventloop

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// handler adapts gnet's callbacks to the owner. Every callback runs on the
// event loop; the fields below it are shared with other goroutines.
type handler struct {
	gnet.BuiltinEventEngine
	owner *owner
	srv   *Server

	loop atomic.Pointer[gnet.EventLoop] // published when the control connection opens
}

// control marks the connection that gives the server a handle on the loop.
type control struct{}

var errNoLoop = errors.New("the event loop is not running")

func newHandler(o *owner, srv *Server) *handler {
	return &handler{owner: o, srv: srv}
}

// Each callback for a session is one turn of the owner (turn.go).

func (h *handler) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	o := h.owner
	switch ctx := c.Context().(type) {
	case control:
		loop := c.EventLoop()
		h.loop.Store(&loop)
		return nil, gnet.None
	case probe:
		return nil, gnet.None
	case *tlsConn:
		ctx.join(c, &o.now)
		if o.shuttingDown {
			return nil, gnet.Close // no handshake yet: nothing to tell it
		}
		o.begin()
		o.open(ctx, ctx) // its handshake starts in OnTraffic (handshake.go)
		o.end(nil)
		return nil, gnet.None
	default:
		if o.shuttingDown {
			o.refuse(c)
			return nil, gnet.Close
		}
		o.begin()
		o.open(c, plainTCP{})
		o.end(nil)
		return nil, gnet.None
	}
}

func (h *handler) OnTraffic(c gnet.Conn) gnet.Action {
	switch ctx := c.Context().(type) {
	case *session:
		return h.sessionTurn(ctx)
	case control: // work queued by other goroutines: serve a slice of it
		_, _ = c.Discard(-1)
		h.srv.calls.turn(h.owner.tick, h.owner.runCall)
	case probe: // the liveness probe: echo
		b, _ := c.Next(-1)
		_, _ = c.Write(b)
	default:
		_, _ = c.Discard(-1)
	}
	return gnet.None
}

// sessionTurn is the owner's turn for a session's input: its handshake
// until that is done, then its frames.
func (h *handler) sessionTurn(s *session) gnet.Action {
	o := h.owner
	o.begin()
	a := gnet.None
	if s.sec.ready() {
		o.traffic(s)
	} else {
		a = s.sec.handshakeTurn(h, s)
	}
	if o.end(s) {
		a = gnet.Close
	}
	if s.closed { // gnet has closed it already (a write failed)
		return gnet.None
	}
	return a
}

func (h *handler) OnClose(c gnet.Conn, _ error) gnet.Action {
	if s, ok := c.Context().(*session); ok {
		s.sec.handshakeClosed(h)
		h.owner.closed(s)
	}
	return gnet.None
}

// OnShutdown runs when the engine stops. Unless the server is shutting down,
// the loop has died under it.
func (h *handler) OnShutdown(gnet.Engine) {
	h.srv.calls.stop()
	if !h.srv.stopping() {
		h.srv.fail(errors.New("the event loop stopped unexpectedly"))
	}
}

// tickLoop runs on its own goroutine, not the loop. It sleeps until the
// owner's next wake-up (see wakeup.go), hands the loop a tick, and waits for
// the tick to plan the next one; a deadline earlier than planned wakes it to
// re-plan. A server with no timers due soon costs no CPU, while expiry keeps
// the wheel's 1 ms precision. It returns an error when the loop refuses a
// tick: the loop is gone, and no lease could ever expire again.
func tickLoop(w *wakeup, tick func() error, stop <-chan struct{}) error {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		var fire <-chan time.Time
		if d, ok := w.sleep(); ok {
			timer.Reset(d)
			fire = timer.C
		}
		select {
		case <-fire:
			if err := tick(); err != nil {
				select {
				case <-stop: // the loop stopped because the server did
					return nil
				default:
					return fmt.Errorf("hand the event loop a tick: %w", err)
				}
			}
			select { // the tick re-plans when it is done
			case <-w.replan:
			case <-stop:
				return nil
			}
		case <-w.replan:
			timer.Stop()
		case <-stop:
			return nil
		}
	}
}
