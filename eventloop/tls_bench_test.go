package eventloop_test

import (
	"runtime"
	"testing"

	"github.com/monolock/monolock/internal/certs/certstest"
	"github.com/monolock/monolock/internal/testsupport/wire"
	"github.com/monolock/monolock/protocol"
)

// BenchmarkTLSHeartbeat is one heartbeat over mutual TLS through the
// in-process server: the client's record, decrypted in the loop, answered
// and encrypted back. server-allocs/op counts only what the server's side
// allocates (stacks through eventloop or gnet, runtime.MemProfileRate = 1):
// the one allocation left is crypto/tls's own, made for every record it
// reads. -benchmem's figures include the client's.
func BenchmarkTLSHeartbeat(b *testing.B) {
	prev := runtime.MemProfileRate
	runtime.MemProfileRate = 1
	defer func() { runtime.MemProfileRate = prev }()
	ts, pki := startTLSServer(b, 0, 0)
	c, _ := wire.Holder(b, ts.Addr().String(), wire.Options{TLS: pki.ClientTLS(certstest.ClientURI)}, "bench", longLease)
	hb := protocol.AppendHeartbeat(nil)
	for range 100 { // past every first-use allocation
		c.Send(hb)
		c.Expect(protocol.TypeAcquired)
	}
	before := serverAllocations()
	b.ResetTimer()
	for range b.N {
		c.Send(hb)
		c.Expect(protocol.TypeAcquired)
	}
	b.StopTimer()
	after := serverAllocations()
	b.ReportMetric(float64(after.total-before.total)/float64(b.N), "server-allocs/op")
	if b.N >= 1000 {
		grown := after.minus(before)
		for _, s := range grown[:min(4, len(grown))] {
			b.Logf("%.2f allocs/op  %s", float64(s.n)/float64(b.N), s.site)
		}
	}
}

// BenchmarkTLSSetup is one mutual-TLS connection from dial to ACQUIRED,
// then closed: the handshake's hand-offs between the loop and its goroutine
// included.
func BenchmarkTLSSetup(b *testing.B) {
	ts, pki := startTLSServer(b, 0, 0)
	cfg := pki.ClientTLS(certstest.ClientURI)
	acquire := protocol.AppendAcquire(nil, longLease, "setup")
	b.ResetTimer()
	for range b.N {
		c := wire.MustDial(b, ts.Addr().String(), wire.Options{TLS: cfg, Safety: safety})
		c.Send(acquire)
		c.Expect(protocol.TypeAcquired)
		_ = c.NC.Close()
	}
}
