package eventloop

import (
	"github.com/panjf2000/gnet/v2"
	"github.com/rs/zerolog"

	"github.com/monolock/monolock/eventloop/tlsconn"
)

// What the external test package's benchmarks (owner_bench_test.go) reach
// inside: the loop's handler over fake connections, without sockets. They
// live outside because the real metrics and audit recorders they plug in
// import this package.

// BenchLoop is the handler and its owner on the system clock.
type BenchLoop struct{ h *handler }

// BenchConn is a connection of a BenchLoop: the rig's fake.
type BenchConn = fakeConn

func NewBenchLoop(cfg Config) *BenchLoop {
	cfg.Logger = zerolog.Nop()
	return &BenchLoop{newHandler(newOwner(cfg.withDefaults(), newSystemClock()), &Server{})}
}

// NewLeaderBenchLoop is a BenchLoop of a node that leads its cluster
// (Config.HA): elected with a deadline no benchmark reaches, a max-lease
// above every benchmark's lease, and a token block of 2^40. What the loop
// asks of etcd is dropped.
func NewLeaderBenchLoop(cfg Config) *BenchLoop {
	cfg.HA = &HAConfig{TTL: 1 << 40, Coordinator: noCoordinator{}}
	cfg.Logger = zerolog.Nop()
	o := newOwner(cfg.withDefaults(), newSystemClock())
	o.initHA(cfg.HA, func(bool) {})
	o.begin()
	o.haElected(1, o.now, o.now, 0, 0)
	o.haMaxLease(1, 1<<31)
	o.haTokenBlock(1, 1<<42, 1<<42+1<<40)
	o.end(nil)
	if !o.ha.serving {
		panic("the bench loop's node does not serve")
	}
	return &BenchLoop{newHandler(o, &Server{})}
}

// noCoordinator is an etcd side that does nothing.
type noCoordinator struct{}

func (noCoordinator) NeedTokenBlock(uint64)       {}
func (noCoordinator) NeedMaxLease(uint64, uint32) {}
func (noCoordinator) TermEnded(uint64, string)    {}

// Join opens a connection, as OnOpen does, and sends it frame; ok reports
// that the frame was applied and the connection left open.
func (l *BenchLoop) Join(frame []byte) (c *BenchConn, ok bool) {
	c = &fakeConn{h: l.h}
	c.RemoteAddr() // a real connection's address is made at accept, not at its grant
	l.h.OnOpen(c)
	s := c.session()
	c.reuse = s
	return c, c.Send(frame) && s.claim.State() != 0
}

// Holder returns the connection holding lock, or nil.
func (l *BenchLoop) Holder(lock string) *BenchConn {
	if h := l.h.owner.table.Holder(lock); h != nil {
		return h.Value.conn.(*fakeConn)
	}
	return nil
}

// Send hands frame to OnTraffic; false when the handler closes the
// connection.
func (c *fakeConn) Send(frame []byte) bool {
	c.in = frame
	return c.h.OnTraffic(c) == gnet.None
}

// Leave is the connection's OnClose: the client has gone.
func (c *fakeConn) Leave() { c.h.OnClose(c, nil) }

// Reopen makes c, closed, a new connection in place, its session reused,
// as OnOpen would without allocating one.
func (c *fakeConn) Reopen() {
	s := c.reuse
	*s = session{conn: c}
	s.claim.Value, s.timer.Value = s, s
	c.ctx = s
	c.h.owner.sessions.add(s, sourceOf(c.RemoteAddr()))
}

// Written is how many bytes were written to c.
func (c *fakeConn) Written() int { return c.n }

// What the TLS tests over real sockets (tlschain_test.go) check against:
// the bound of a client's last flight, and the HelloRetryRequest a server's
// first record may be.
const MaxClientFlight = tlsconn.MaxClientFlight

var IsHelloRetryRequest = tlsconn.IsHelloRetryRequest
