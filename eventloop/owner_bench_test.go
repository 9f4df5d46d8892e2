package eventloop

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/rs/zerolog"

	"github.com/monolock/monolock/internal/audit"
	"github.com/monolock/monolock/internal/metrics"
	"github.com/monolock/monolock/protocol"
)

// bookkeeping is what the owner does besides the protocol: nothing, metrics,
// or metrics and the audit log.
var bookkeeping = []struct {
	name           string
	metrics, audit bool
}{
	{"bare", false, false},
	{"metrics", true, false},
	{"metrics+audit", true, true},
}

// newBenchLoop is the loop's handler and owner, without sockets.
func newBenchLoop(b *testing.B, withMetrics, withAudit bool) *handler {
	cfg := Config{Logger: zerolog.Nop()}
	if withMetrics {
		cfg.Metrics = metrics.New(nil)
	}
	if withAudit {
		log, err := audit.Open(filepath.Join(b.TempDir(), "audit.jsonl"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = log.Close() })
		cfg.Audit = audit.NewRecorder(log)
	}
	return newHandler(newOwner(cfg.withDefaults(), newSystemClock()), &Server{})
}

// join opens a connection and sends frame, through the handler's OnOpen
// and OnTraffic.
func (h *handler) join(b *testing.B, frame []byte) *session {
	c := &fakeConn{h: h, in: frame}
	c.RemoteAddr() // a real connection's address is made at accept, not at its grant
	h.OnOpen(c)
	s := c.session()
	if h.OnTraffic(c) == gnet.Close {
		b.Fatal("ACQUIRE refused")
	}
	if s.claim.State() == 0 {
		b.Fatal("ACQUIRE not applied")
	}
	return s
}

// cpuTime is the process's user plus system CPU time, which includes the
// audit log's writer goroutine.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

// BenchmarkHeartbeat measures one HEARTBEAT through the owner: parse from the
// inbound buffer, refresh lastSeen, look up the state in the lock table and
// encode the ACQUIRED reply. It must not allocate.
func BenchmarkHeartbeat(b *testing.B) {
	for _, bk := range bookkeeping {
		b.Run(bk.name, func(b *testing.B) {
			h := newBenchLoop(b, bk.metrics, bk.audit)
			s := h.join(b, protocol.AppendAcquire(nil, 2000, "bench"))
			c := s.conn.(*fakeConn)
			hb := protocol.AppendHeartbeat(nil)
			b.ReportAllocs()
			start := cpuTime()
			b.ResetTimer()
			for range b.N {
				c.in = hb
				h.OnTraffic(c)
			}
			b.StopTimer()
			reportCPU(b, start)
			if c.n != protocol.AcquiredLen*(b.N+1) {
				b.Fatalf("wrote %d bytes for %d heartbeats", c.n, b.N)
			}
		})
	}
}

// BenchmarkGrant measures a grant and its release on a free lock: ACQUIRE
// parsed and granted, ACQUIRED encoded, then the connection's close. The
// session itself is reused, so what remains is the protocol work, the lock
// table and the bookkeeping.
func BenchmarkGrant(b *testing.B) {
	for _, bk := range bookkeeping {
		b.Run(bk.name, func(b *testing.B) {
			h := newBenchLoop(b, bk.metrics, bk.audit)
			o := h.owner
			acquire := protocol.AppendAcquire(nil, 2000, "bench")
			s := h.join(b, acquire)
			c := s.conn.(*fakeConn)
			h.OnClose(c, nil)
			b.ReportAllocs()
			start := cpuTime()
			b.ResetTimer()
			for range b.N {
				// The session is reopened in place, as a new connection would be.
				*s = session{conn: c}
				s.claim.Value, s.timer.Value = s, s
				c.ctx = s
				o.sessions.add(s)
				c.in = acquire
				h.OnTraffic(c)
				h.OnClose(c, nil)
			}
			b.StopTimer()
			reportCPU(b, start)
		})
	}
}

// BenchmarkHandover measures a grant pushed to a waiter: the holder leaves,
// the head of the queue is promoted and sent ACQUIRED, and a new waiter joins
// the back (so the queue stays the same length). Apart from the new session,
// which a real connection also allocates, nothing is allocated.
func BenchmarkHandover(b *testing.B) {
	h := newBenchLoop(b, true, false)
	acquire := protocol.AppendAcquire(nil, 2000, "bench")
	holder := h.join(b, acquire)
	for range 8 {
		h.join(b, acquire)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		h.OnClose(holder.conn.(*fakeConn), nil)
		holder = h.owner.table.Holder("bench").Value
		b.StopTimer()
		h.join(b, acquire)
		b.StartTimer()
	}
}
