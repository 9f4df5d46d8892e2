package eventloop

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/rs/zerolog"

	"github.com/monolock/monolock/protocol"
)

// fakeClock is a Clock a test moves by hand. Its wall clock can be stepped
// apart from the monotonic one, as an NTP correction would.
type fakeClock struct {
	wall time.Time
	mono time.Duration
}

func newFakeClock() *fakeClock {
	return &fakeClock{wall: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC), mono: time.Hour}
}

func (c *fakeClock) Now() (time.Time, time.Duration) { return c.wall, c.mono }

// advance moves both clocks forward.
func (c *fakeClock) advance(d time.Duration) {
	c.wall = c.wall.Add(d)
	c.mono += d
}

// fakeConn is the part of a connection the owner uses: an inbound buffer it
// can Peek and Discard, an output sink whose draining the test controls, and
// a synchronous close that runs the owner's onClose, as gnet's does.
type fakeConn struct {
	o   *owner
	in  []byte
	out []byte // everything written, for the test to decode
	n   int    // bytes written, when out is not kept (benchmarks)

	keep      bool // keep written bytes in out
	stuck     bool // the peer does not read: written bytes stay outbound
	pending   int  // outbound bytes the peer has not drained
	failWrite bool // the next write fails, which closes the connection
	wakes     int  // Wake calls: turns the owner asked for
	closed    bool
	closedAt  time.Duration // the owner's clock when it closed
	port      int           // tells the rig's connections apart in RemoteAddr
	addr      *net.TCPAddr  // made by the first RemoteAddr
	ctx       any

	kernelQueued int    // bytes the kernel holds for the peer (see kernelQueue)
	kernelAcked  uint64 // bytes the peer has acknowledged
	kernelLooks  int    // kernelQueue calls
}

func (c *fakeConn) kernelQueue() (int, uint64) {
	c.kernelLooks++
	return c.kernelQueued, c.kernelAcked
}

func (c *fakeConn) Peek(int) ([]byte, error) { return c.in, nil }
func (c *fakeConn) Discard(n int) (int, error) {
	c.in = c.in[n:]
	return n, nil
}

func (c *fakeConn) Write(p []byte) (int, error) {
	if c.closed {
		return 0, net.ErrClosed
	}
	if c.failWrite {
		_ = c.closeNow()
		return 0, errors.New("write: broken pipe")
	}
	c.n += len(p)
	if c.keep {
		c.out = append(c.out, p...)
	}
	if c.stuck {
		c.pending += len(p)
	}
	return len(p), nil
}

func (c *fakeConn) OutboundBuffered() int         { return c.pending }
func (c *fakeConn) Wake(gnet.AsyncCallback) error { c.wakes++; return nil }
func (c *fakeConn) SetContext(ctx any)            { c.ctx = ctx }

// RemoteAddr is made once and kept, as gnet keeps a connection's address:
// the allocation benchmarks must not count the fake's own.
func (c *fakeConn) RemoteAddr() net.Addr {
	if c.addr == nil {
		c.addr = &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 40000 + c.port}
	}
	return c.addr
}
func (c *fakeConn) session() *session           { s, _ := c.ctx.(*session); return s }
func (c *fakeConn) drain()                      { c.pending = 0; c.stuck = false }
func (c *fakeConn) reads() []protocol.Frame     { return decodeAll(c.out) }
func (c *fakeConn) takeReads() []protocol.Frame { f := c.reads(); c.out = nil; return f }
func (c *fakeConn) String() string              { return c.RemoteAddr().String() }
func (c *fakeConn) closeNow() error {
	if c.closed {
		return nil
	}
	c.closed = true
	c.closedAt = offsetNow(c.o)
	if s := c.session(); s != nil {
		c.o.closed(s) // gnet's OnClose
	}
	return nil
}

// decodeAll decodes every server frame in b; the names and reasons are
// copied.
func decodeAll(b []byte) []protocol.Frame {
	var frames []protocol.Frame
	for len(b) > 0 {
		var f protocol.Frame
		n, err := protocol.DecodeServer(b, &f)
		if err != nil || n == 0 {
			panic("undecodable server output")
		}
		f.Reason = append([]byte(nil), f.Reason...)
		frames = append(frames, f)
		b = b[n:]
	}
	return frames
}

// rig is an owner driven by hand: a fake clock, fake connections, and the
// ticker's job done by run.
type rig struct {
	t     testing.TB
	o     *owner
	clk   *fakeClock
	conns int // connections made, for their ports
}

func newRig(t testing.TB, cfg Config) *rig {
	if cfg.IOTimeout == 0 {
		cfg.IOTimeout = time.Second
	}
	cfg.Logger = zerolog.Nop()
	clk := newFakeClock()
	return &rig{t: t, o: newOwner(cfg.withDefaults(), clk), clk: clk}
}

// offsetNow is the owner's clock as the next turn will read it.
func offsetNow(o *owner) time.Duration {
	_, mono := o.clk.Now()
	return mono - o.mono0 + wheelTick
}

// now is the owner's clock as the next turn will read it.
func (r *rig) now() time.Duration { return offsetNow(r.o) }

// connect opens a connection, as OnOpen does.
func (r *rig) connect() *fakeConn {
	r.conns++
	c := &fakeConn{o: r.o, keep: true, port: r.conns}
	r.o.begin()
	r.o.open(c)
	r.o.end(nil)
	return c
}

// send delivers bytes to c and runs its OnTraffic; a Close action closes it
// as gnet would.
func (r *rig) send(c *fakeConn, b []byte) {
	c.in = append(c.in, b...)
	r.turn(c)
}

// turn runs OnTraffic for what c has buffered.
func (r *rig) turn(c *fakeConn) {
	s := c.session()
	if s == nil {
		r.t.Fatalf("%v: no open session", c)
	}
	if r.o.trafficTurn(s) {
		_ = c.closeNow()
	}
}

// acquire connects and sends ACQUIRE.
func (r *rig) acquire(name string, leaseMS uint32) *fakeConn {
	c := r.connect()
	r.send(c, protocol.AppendAcquire(nil, leaseMS, name))
	return c
}

// run moves the clock to d from now, handing the owner a tick at every
// wake-up it planned on the way, as the ticker goroutine would.
func (r *rig) run(d time.Duration) {
	_, start := r.clk.Now()
	end := start + d
	for {
		at, ok := r.o.wakeup.planned()
		_, mono := r.clk.Now()
		at += r.o.mono0 - wheelTick // the plan is on the owner's offsets
		if !ok || at > end {
			r.clk.advance(end - mono)
			return
		}
		if at > mono {
			r.clk.advance(at - mono)
		}
		r.o.tick()
	}
}

// runTo moves the clock to the owner offset at, ticking on the way.
func (r *rig) runTo(at time.Duration) { r.run(at - r.now()) }

// turnOf runs fn as a turn of its own, as a call from another goroutine.
func (r *rig) turnOf(fn func()) {
	r.o.begin()
	fn()
	r.o.end(nil)
}

// trafficTurn is OnTraffic for a plain session: true when the handler
// would return gnet.Close.
func (o *owner) trafficTurn(s *session) bool {
	o.begin()
	o.traffic(s)
	return o.end(s)
}

// server returns a Server around the rig's owner, so that a test reaches the
// owner through the Server's own methods (ForceRelease, KickWaiter, Locks),
// whose calls then run synchronously: a wake-up serves the queue at once, on
// the caller's goroutine, so the rig's owner is driven by the test alone.
func (r *rig) server() *Server {
	s := &Server{handler: &handler{owner: r.o}}
	s.calls = newCallQueue(func() { s.calls.turn(r.o.tick, r.o.runCall) })
	return s
}
