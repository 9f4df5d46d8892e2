package eventloop

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// This file is the event loop's side of gnet: its callbacks, each of which
// is one turn of the owner (turn.go) or a visit to the control connection
// (control_conn.go) or the liveness probe (probe.go).

// handler adapts gnet's callbacks to the owner. Every callback runs on the
// event loop; the fields below it are shared with other goroutines.
type handler struct {
	gnet.BuiltinEventEngine
	owner *owner
	srv   *Server

	loop atomic.Pointer[gnet.EventLoop] // published when the control connection opens
}

func newHandler(o *owner, srv *Server) *handler {
	return &handler{owner: o, srv: srv}
}

func (h *handler) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	o := h.owner
	switch ctx := c.Context().(type) {
	case control:
		loop := c.EventLoop()
		h.loop.Store(&loop)
		return nil, gnet.None
	case probe:
		return nil, gnet.None
	case securedConn: // a TLS connection, made at accept
		ctx.join(c, &o.now)
		o.begin()
		if o.refusing() {
			o.end(nil)
			return nil, gnet.Close // no handshake yet: nothing to tell it
		}
		o.open(ctx) // its handshake starts in OnTraffic (handshake_loop.go)
		o.end(nil)
		return nil, gnet.None
	default:
		o.begin() // which may end a node's term (ha.go): then it is refused
		if o.refusing() {
			o.end(nil)
			return o.refusal(), gnet.Close // gnet writes it, then closes
		}
		o.open(c)
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
	if !s.registered() && !s.closing { // input before ACQUIRE defers eviction (release.go)
		s.lastSeen = o.now
		o.sessions.heardBeforeAcquire(s)
	}
	a := gnet.None
	switch {
	case s.closing: // the turn's start ended the node's term (ha.go): read nothing
	case s.sec().ready():
		o.traffic(s)
	default:
		a = s.sec().handshakeTurn(h, s)
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
		s.sec().handshakeClosed(h)
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

// securedConn is a connection that brings its own security layer: a TLS
// session, which the accept loop creates and OnOpen attaches to gnet's
// connection.
type securedConn interface {
	conn
	security
	join(gc gnet.Conn, now *time.Duration)
}
