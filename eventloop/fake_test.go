package eventloop

import (
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/rs/zerolog"

	"github.com/monolock/monolock/locktable"
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

// fakeConn is the part of a gnet.Conn that the handler uses: an inbound
// buffer it can Peek and Discard, an output sink whose draining the test
// controls, and a synchronous close that runs the handler's OnClose, as
// gnet's does. The rest of gnet.Conn is embedded unset: the handler calls
// none of it for a plain session, and a call would panic. Its security layer
// is plain TCP's, with the certificate identity a test gives it (id).
type fakeConn struct {
	gnet.Conn
	plainTCP
	h   *handler
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
	released  bool          // OnClose has returned: gnet has forgotten the address
	port      int           // tells the rig's connections apart in RemoteAddr
	addr      *net.TCPAddr  // made by the first RemoteAddr
	id        string        // the client's certificate identity, "" for none
	ctx       any

	kernelQueued int    // bytes the kernel holds for the peer (see kernelQueue)
	kernelAcked  uint64 // bytes the peer has acknowledged
	kernelLooks  int    // kernelQueue calls

	reuse *session // the session Reopen reuses (benchmarks, export_test.go)

	// watch, when set, hears what happens to the connection, in order:
	// the rule scripts record it.
	watch func(c *fakeConn, wrote []byte, closed bool)
}

func (c *fakeConn) kernelQueue() (int, uint64) {
	c.kernelLooks++
	return c.kernelQueued, c.kernelAcked
}

func (c *fakeConn) Peek(int) ([]byte, error) { return c.in, nil }

// Discard drops n bytes; n < 0 drops everything, as gnet's does.
func (c *fakeConn) Discard(n int) (int, error) {
	if n < 0 || n > len(c.in) {
		n = len(c.in)
	}
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
	if c.watch != nil {
		c.watch(c, p, false)
	}
	return len(p), nil
}

func (c *fakeConn) OutboundBuffered() int         { return c.pending }
func (c *fakeConn) Wake(gnet.AsyncCallback) error { c.wakes++; return nil }
func (c *fakeConn) SetContext(ctx any)            { c.ctx = ctx }
func (c *fakeConn) Context() any                  { return c.ctx }

// RemoteAddr is made once and kept, as gnet keeps a connection's address,
// until the close's OnClose returns: then gnet releases the connection and
// its address is nil. The allocation benchmarks must not count the fake's
// own.
func (c *fakeConn) RemoteAddr() net.Addr {
	if c.released {
		return nil
	}
	return c.addrOf()
}

// addrOf is the connection's address, also after it closed.
func (c *fakeConn) addrOf() *net.TCPAddr {
	if c.addr == nil {
		c.addr = &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 40000 + c.port}
	}
	return c.addr
}

func (c *fakeConn) identity() string            { return c.id }
func (c *fakeConn) session() *session           { s, _ := c.ctx.(*session); return s }
func (c *fakeConn) drain()                      { c.pending = 0; c.stuck = false }
func (c *fakeConn) reads() []protocol.Frame     { return decodeAll(c.out) }
func (c *fakeConn) takeReads() []protocol.Frame { f := c.reads(); c.out = nil; return f }
func (c *fakeConn) String() string              { return c.addrOf().String() }

// closeNow closes the connection and runs OnClose before it returns, as
// the loop's own Close does.
func (c *fakeConn) closeNow() error {
	if c.closed {
		return nil
	}
	c.closed = true
	c.closedAt = offsetNow(c.h.owner)
	if c.watch != nil {
		c.watch(c, nil, true)
	}
	c.h.OnClose(c, nil)
	c.released = true
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

// rig is the loop driven by hand: the real handler and owner over a fake
// clock and fake connections, with the test playing gnet and the ticker.
// Its Server's call queue is the real one; the test serves it (serve), as
// the loop does when the control connection is readable, so admin calls
// and ticks take the path they take in the server.
type rig struct {
	t     testing.TB
	o     *owner
	h     *handler
	srv   *Server
	clk   *fakeClock
	ctl   *fakeConn     // the control connection
	wakes chan struct{} // the call queue's wake-ups, for serve
	calls int           // calls the loop has run
	conns int           // connections made, for their ports
	from  net.IP        // the address the next connections come from; nil for 192.0.2.1
	watch func(c *fakeConn, wrote []byte, closed bool)

	listener func(open bool) // hears the loop open or close the lock listener (Config.HA)
}

func newRig(t testing.TB, cfg Config) *rig {
	if cfg.IOTimeout == 0 {
		cfg.IOTimeout = time.Second
	}
	cfg.Logger = zerolog.Nop()
	cfg = cfg.withDefaults()
	clk := newFakeClock()
	r := &rig{t: t, clk: clk, wakes: make(chan struct{}, 4)}
	r.o = newOwner(cfg, clk)
	r.srv = &Server{cfg: cfg, log: cfg.Logger, metrics: cfg.Metrics}
	r.o.initHA(cfg.HA, func(open bool) {
		if r.listener != nil {
			r.listener(open)
		}
	})
	r.h = newHandler(r.o, r.srv)
	r.srv.handler = r.h
	r.srv.calls = newCallQueue(func() { r.wakes <- struct{}{} })
	r.ctl = &fakeConn{h: r.h, ctx: control{}}
	return r
}

// offsetNow is the owner's clock as the next turn will read it.
func offsetNow(o *owner) time.Duration {
	_, mono := o.clk.Now()
	return mono - o.mono0 + wheelTick
}

// now is the owner's clock as the next turn will read it.
func (r *rig) now() time.Duration { return offsetNow(r.o) }

// connect opens a connection: OnOpen, and what gnet does with its answer.
func (r *rig) connect() *fakeConn {
	r.conns++
	c := &fakeConn{h: r.h, keep: true, port: r.conns, watch: r.watch}
	if r.from != nil {
		c.addr = &net.TCPAddr{IP: r.from, Port: 40000 + c.port}
	}
	out, action := r.h.OnOpen(c)
	if len(out) > 0 {
		_, _ = c.Write(out)
	}
	if action == gnet.Close {
		_ = c.closeNow()
	}
	return c
}

// send delivers bytes to c and runs its OnTraffic.
func (r *rig) send(c *fakeConn, b []byte) {
	c.in = append(c.in, b...)
	r.turn(c)
}

// turn runs OnTraffic for what c has buffered; a Close action closes it as
// gnet would.
func (r *rig) turn(c *fakeConn) {
	if c.session() == nil {
		r.t.Fatalf("%v: no open session", c)
	}
	if r.h.OnTraffic(c) == gnet.Close {
		_ = c.closeNow()
	}
}

// acquire connects and sends ACQUIRE.
func (r *rig) acquire(name string, leaseMS uint32) *fakeConn {
	c := r.connect()
	r.send(c, protocol.AppendAcquire(nil, leaseMS, name))
	return c
}

// tick hands the owner a tick now, through the call queue, as the ticker
// does whenever any session's timer is due: on a busy server, every
// millisecond.
func (r *rig) tick() {
	if err := r.srv.tick(); err != nil {
		r.t.Fatal(err)
	}
	<-r.wakes
	r.controlTurn()
}

// controlTurn is OnTraffic for the control connection: the loop serves a
// slice of its call queue. It counts the calls that ran.
func (r *rig) controlTurn() {
	q := r.srv.calls
	q.mu.Lock()
	queued := append([]*loopCall(nil), q.calls...)
	q.mu.Unlock()
	r.h.OnTraffic(r.ctl)
	for _, c := range queued {
		if c.state.Load() == callRunning {
			r.calls++
		}
	}
}

// serve plays the loop for calls made on other goroutines: one control
// turn per wake-up, until done is closed. between runs after each turn
// with the calls run so far.
func (r *rig) serve(done <-chan struct{}, between func(calls int)) {
	for {
		select {
		case <-r.wakes:
			r.controlTurn()
			if between != nil {
				between(r.calls)
			}
		case <-done:
			return
		}
	}
}

// call runs fn, which reaches the loop through the Server's methods, on
// another goroutine while the test serves the loop, and returns fn's error.
func (r *rig) call(fn func() error, between func(calls int)) error {
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		err = fn()
	}()
	r.serve(done, between)
	return err
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
		r.tick()
	}
}

// pause moves the clock by d without a tick: the process was stopped
// (SIGSTOP) and nothing ran meanwhile.
func (r *rig) pause(d time.Duration) { r.clk.advance(d) }

// runTo moves the clock to the owner offset at, ticking on the way.
func (r *rig) runTo(at time.Duration) { r.run(at - r.now()) }

// turnOf runs fn as a call from another goroutine: a turn of its own.
func (r *rig) turnOf(fn func(o *owner)) {
	if err := r.call(func() error { return r.srv.call(r.t.Context(), fn) }, nil); err != nil {
		r.t.Fatal(err)
	}
}

// fakeMetrics counts what the loop reports, for the scripts to print.
type fakeMetrics struct {
	mu        sync.Mutex // the loop and a test's goroutine may both read
	counts    map[string]int
	noMetrics // the methods not counted below
}

func (m *fakeMetrics) add(name string, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.counts == nil {
		m.counts = map[string]int{}
	}
	m.counts[name] += n
}

func (m *fakeMetrics) Opened()               { m.add("opened", 1) }
func (m *fakeMetrics) Closed()               { m.add("closed", 1) }
func (m *fakeMetrics) Heartbeat()            { m.add("heartbeats", 1) }
func (m *fakeMetrics) Queued()               { m.add("waiters", 1) }
func (m *fakeMetrics) Dequeued()             { m.add("waiters", -1) }
func (m *fakeMetrics) Granted(time.Duration) { m.add("grants", 1) }
func (m *fakeMetrics) Released(r locktable.ReleaseReason, _ time.Duration) {
	m.add("released:"+r.String(), 1)
}
func (m *fakeMetrics) ProtocolError(code protocol.Code) { m.add("errors:"+code.Label(), 1) }
func (m *fakeMetrics) ACLDenied()                       { m.add("acl-denials", 1) }
func (m *fakeMetrics) Evicted()                         { m.add("evictions", 1) }
func (m *fakeMetrics) SilentWaiterEvicted()             { m.add("silent waiters evicted", 1) }
func (m *fakeMetrics) ShareEvicted()                    { m.add("share evictions", 1) }
func (m *fakeMetrics) NewcomerRefused()                 { m.add("newcomers refused", 1) }

// fakeAudit keeps the audit events the loop records, for the scripts to
// print. remote is the address as the audit log writes it, "" for none.
type fakeAudit struct {
	mu     sync.Mutex // the loop and a test's goroutine may both read
	events []auditEvent
}

type auditEvent struct {
	name, lock, identity, remote, reason string
	operator                             string // force_release and kick_waiter: who asked
	token                                uint64
}

func (a *fakeAudit) add(e auditEvent, remote net.Addr) {
	if remote != nil {
		e.remote = remote.String()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.events = append(a.events, e)
}

// take returns the events recorded since the last take.
func (a *fakeAudit) take() []auditEvent {
	a.mu.Lock()
	defer a.mu.Unlock()
	e := a.events
	a.events = nil
	return e
}

func (a *fakeAudit) Granted(_ time.Time, lock, identity string, remote net.Addr, token uint64, _ time.Duration) {
	a.add(auditEvent{name: "granted", lock: lock, identity: identity, token: token}, remote)
}

func (a *fakeAudit) Released(_ time.Time, lock, identity string, remote net.Addr, token uint64, _ time.Duration, reason string) {
	a.add(auditEvent{name: "released", lock: lock, identity: identity, token: token, reason: reason}, remote)
}

func (a *fakeAudit) Denied(_ time.Time, lock, identity string, remote net.Addr) {
	a.add(auditEvent{name: "denied", lock: lock, identity: identity}, remote)
}

func (a *fakeAudit) ForceRelease(_ time.Time, lock, identity string, remote net.Addr, token uint64, operator string) {
	a.add(auditEvent{name: "force_release", lock: lock, identity: identity, token: token, operator: operator}, remote)
}

func (a *fakeAudit) KickWaiter(_ time.Time, lock, identity string, remote net.Addr, operator string) {
	a.add(auditEvent{name: "kick_waiter", lock: lock, identity: identity, operator: operator}, remote)
}
