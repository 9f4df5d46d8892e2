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
// process started per cycle, and user-ns/op and sys-ns/op, the CPU time
// the process spent per cycle in user space (the Go runtime's and the code's
// own work) and in the kernel (the syscalls): on a shared machine the wall
// time per cycle varies with the neighbours, the CPU time less. All include
// the server's share, the same for every client version.
func BenchmarkAcquireClose(b *testing.B) {
	addr := startServerAt(b, "127.0.0.1:0").Addr().String()
	c := New(Config{Address: addr})
	created := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(created)
	before := created[0].Value.Uint64()
	userBefore, sysBefore := processCPU(b)
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
	user, sys := processCPU(b)
	metrics.Read(created)
	b.ReportMetric(float64((user-userBefore).Nanoseconds())/float64(b.N), "user-ns/op")
	b.ReportMetric(float64((sys-sysBefore).Nanoseconds())/float64(b.N), "sys-ns/op")
	b.ReportMetric(float64(created[0].Value.Uint64()-before)/float64(b.N), "goroutines/op")
}

// processCPU is the CPU time the process has used so far, in user space and
// in the kernel.
func processCPU(b *testing.B) (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}
