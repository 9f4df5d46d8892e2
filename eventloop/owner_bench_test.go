package eventloop

import (
	"net"
	"testing"

	"github.com/panjf2000/gnet/v2"
	"github.com/rs/zerolog"

	"github.com/monolock/monolock/protocol"
)

// fakeConn is the part of gnet.Conn the owner uses on the frame path: an
// inbound buffer it can Peek and Discard, and an output sink.
type fakeConn struct {
	gnet.Conn // nil: any other method panics, which keeps the fake honest
	in        []byte
	out       int // bytes "written"
	ctx       any
}

func (c *fakeConn) Peek(n int) ([]byte, error) {
	if n <= 0 || n > len(c.in) {
		n = len(c.in)
	}
	return c.in[:n], nil
}
func (c *fakeConn) Discard(n int) (int, error)  { c.in = c.in[n:]; return n, nil }
func (c *fakeConn) Write(p []byte) (int, error) { c.out += len(p); return len(p), nil }
func (c *fakeConn) OutboundBuffered() int       { return 0 }
func (c *fakeConn) SetContext(ctx any)          { c.ctx = ctx }
func (c *fakeConn) Context() any                { return c.ctx }
func (c *fakeConn) RemoteAddr() net.Addr        { return &net.TCPAddr{} }

func newBenchOwner() *owner {
	return newOwner(Config{Logger: zerolog.Nop()}.withDefaults())
}

// BenchmarkHeartbeat measures one HEARTBEAT through the owner: parse from the
// inbound buffer, refresh lastSeen, look up the state in the lock table and
// encode the ACQUIRED reply. It must not allocate.
func BenchmarkHeartbeat(b *testing.B) {
	o := newBenchOwner()
	c := &fakeConn{in: protocol.AppendAcquire(nil, 2000, "bench")}
	o.open(c, &net.TCPAddr{}, "")
	s := c.ctx.(*session)
	o.traffic(s)
	if s.claim.Token() == 0 {
		b.Fatal("not granted")
	}
	hb := protocol.AppendHeartbeat(nil)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		c.in = hb
		o.traffic(s)
	}
	if c.out != protocol.AcquiredLen*(b.N+1) {
		b.Fatalf("wrote %d bytes for %d heartbeats", c.out, b.N)
	}
}

// BenchmarkHandover measures a grant pushed to a waiter: the holder leaves,
// the head of the queue is promoted and sent ACQUIRED, and a new waiter joins
// the back (so the queue stays the same length). Apart from the new session,
// which a real connection also allocates, nothing is allocated.
func BenchmarkHandover(b *testing.B) {
	o := newBenchOwner()
	acquire := protocol.AppendAcquire(nil, 2000, "bench")
	join := func() *session {
		c := &fakeConn{in: acquire}
		o.open(c, &net.TCPAddr{}, "")
		s := c.ctx.(*session)
		o.traffic(s)
		return s
	}
	holder := join()
	for range 8 {
		join()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		o.onClose(holder)
		holder = o.table.Holder("bench").Value.(*session)
		b.StopTimer()
		join()
		b.StartTimer()
	}
}
