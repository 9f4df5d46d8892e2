//go:build unix

package client

import (
	"context"
	"runtime/metrics"
	"syscall"
	"testing"
	"time"
)

// BenchmarkAcquireClose measures one whole lock cycle against the in-process
// server over loopback: Acquire (dial, ACQUIRE, ACQUIRED), then Close
// (RELEASE, the server's close, the client's), each Acquire with a deadline
// of its own as a load's caller gives it. Run it with -benchmem. Besides
// ns/op, B/op and allocs/op it reports goroutines/op, the goroutines the
// process started per cycle, and cpu-ns/op, the CPU time (user and system)
// the process spent per cycle: on a shared machine the wall time per cycle
// varies with the neighbours, the CPU time much less. Both include the
// server's share, the same for every client version.
func BenchmarkAcquireClose(b *testing.B) {
	addr := startServerAt(b, "127.0.0.1:0").Addr().String()
	c := New(Config{Address: addr})
	created := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(created)
	before := created[0].Value.Uint64()
	cpuBefore := processCPU(b)
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
	cpu := processCPU(b) - cpuBefore
	metrics.Read(created)
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(created[0].Value.Uint64()-before)/float64(b.N), "goroutines/op")
}

// processCPU is the CPU time the process has used so far, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
