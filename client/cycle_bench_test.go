package client

import (
	"context"
	"runtime/metrics"
	"testing"
	"time"
)

// BenchmarkAcquireClose measures one whole lock cycle against the in-process
// server over loopback: Acquire (dial, ACQUIRE, ACQUIRED), then Close
// (RELEASE, the server's close, the client's), each Acquire with a deadline
// of its own as a load's caller gives it. Run it with -benchmem. Besides
// ns/op, B/op and allocs/op it reports goroutines/op: the goroutines the
// process started per cycle, the server's included (the same for every
// client version).
func BenchmarkAcquireClose(b *testing.B) {
	addr := startServerAt(b, "127.0.0.1:0").Addr().String()
	c := New(Config{Address: addr})
	created := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(created)
	before := created[0].Value.Uint64()
	b.ReportAllocs()
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		l, err := c.Acquire(ctx, "cycle", time.Minute)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
	}
	metrics.Read(created)
	b.ReportMetric(float64(created[0].Value.Uint64()-before)/float64(b.N), "goroutines/op")
}
