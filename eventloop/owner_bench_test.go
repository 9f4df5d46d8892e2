package eventloop_test

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/monolock/monolock/eventloop"
	"github.com/monolock/monolock/internal/audit"
	"github.com/monolock/monolock/internal/metrics"
	"github.com/monolock/monolock/protocol"
)

// bookkeeping is what the owner does besides the protocol: nothing, metrics,
// or metrics and the audit log.
var bookkeeping = []struct {
	name           string
	metrics, audit bool
	leader         bool // a node leading its cluster (Config.HA): tokens from a block
}{
	{"bare", false, false, false},
	{"metrics", true, false, false},
	{"metrics+audit", true, true, false},
	{"ha-leader", false, false, true},
}

// newBenchLoop is the loop's handler and owner, without sockets, with the
// real metrics and audit recorder when asked for.
func newBenchLoop(b *testing.B, withMetrics, withAudit bool, leader ...bool) *eventloop.BenchLoop {
	var cfg eventloop.Config
	if len(leader) > 0 && leader[0] {
		return eventloop.NewLeaderBenchLoop(cfg)
	}
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
	return eventloop.NewBenchLoop(cfg)
}

// join opens a connection and sends frame, through the handler's OnOpen
// and OnTraffic.
func join(b *testing.B, l *eventloop.BenchLoop, frame []byte) *eventloop.BenchConn {
	c, ok := l.Join(frame)
	if !ok {
		b.Fatal("ACQUIRE refused or not applied")
	}
	return c
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
			l := newBenchLoop(b, bk.metrics, bk.audit, bk.leader)
			c := join(b, l, protocol.AppendAcquire(nil, 2000, "bench"))
			hb := protocol.AppendHeartbeat(nil)
			b.ReportAllocs()
			start := cpuTime()
			b.ResetTimer()
			for range b.N {
				c.Send(hb)
			}
			b.StopTimer()
			reportCPU(b, start)
			if c.Written() != protocol.AcquiredLen*(b.N+1) {
				b.Fatalf("wrote %d bytes for %d heartbeats", c.Written(), b.N)
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
			l := newBenchLoop(b, bk.metrics, bk.audit, bk.leader)
			acquire := protocol.AppendAcquire(nil, 2000, "bench")
			c := join(b, l, acquire)
			c.Leave()
			b.ReportAllocs()
			start := cpuTime()
			b.ResetTimer()
			for range b.N {
				c.Reopen() // as a new connection would be
				c.Send(acquire)
				c.Leave()
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
	l := newBenchLoop(b, true, false)
	acquire := protocol.AppendAcquire(nil, 2000, "bench")
	holder := join(b, l, acquire)
	for range 8 {
		join(b, l, acquire)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		holder.Leave()
		holder = l.Holder("bench")
		b.StopTimer()
		join(b, l, acquire)
		b.StartTimer()
	}
}
