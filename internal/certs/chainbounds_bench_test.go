package certs

import (
	"crypto/elliptic"
	"crypto/tls"
	"net"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/monolock/monolock/internal/certs/certstest"
)

// BenchmarkClientChainHandshake is one mutual-TLS handshake over net.Pipe
// with each kind of client chain, against Load's configuration (bounds, then
// crypto/x509) and, for comparison, against crypto/tls verifying the chain
// itself as Load's configuration did before the bounds. server-µs/op is the
// CPU time of the server's side alone: its goroutine runs on a thread of its
// own, whose CPU clock is read around the handshake. ns/op and -benchmem's
// figures include the client's side.
func BenchmarkClientChainHandshake(b *testing.B) {
	p := certstest.NewPKI(b, b.TempDir())
	bounded, err := Load(mtlsFiles(p))
	if err != nil {
		b.Fatal(err)
	}
	unbounded := bounded.Clone()
	unbounded.ClientAuth, unbounded.VerifyConnection = tls.RequireAndVerifyClientCert, nil

	must := func(c tls.Certificate, err error) tls.Certificate {
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	honest := p.ClientTLS(certstest.ClientURI).Certificates[0]
	forged := must(p.ForgedChain(60, elliptic.P521()))
	forgedP384 := must(p.ForgedChain(MaxClientChainCerts-1, elliptic.P384()))
	manySANs := must(p.ClientChain(certstest.ChainOptions{SANs: 999}))
	atBounds := must(p.ClientChain(certstest.ChainOptions{Intermediates: MaxClientChainCerts - 1, SANs: MaxClientCertSANs - 1}))
	for _, c := range []struct {
		name   string
		cert   tls.Certificate
		server *tls.Config
	}{
		{"honest", honest, bounded},
		{"honest, crypto/tls verifying", honest, unbounded},
		{"chain at the bounds", atBounds, bounded},
		{"leaf and 60 forged P-521 CAs", forged, bounded},
		{"leaf and 60 forged P-521 CAs, crypto/tls verifying", forged, unbounded},
		{"leaf and 3 forged P-384 CAs", forgedP384, bounded},
		{"1,000 SANs", manySANs, bounded},
		{"1,000 SANs, crypto/tls verifying", manySANs, unbounded},
	} {
		b.Run(c.name, func(b *testing.B) {
			client := p.WithCertificate(c.cert)
			client.MaxVersion = tls.VersionTLS13
			var serverCPU time.Duration
			b.ReportAllocs()
			for range b.N {
				serverCPU += pipeHandshake(b, client, c.server)
			}
			b.ReportMetric(float64(serverCPU.Microseconds())/float64(b.N), "server-µs/op")
		})
	}
}

// pipeHandshake runs one handshake over net.Pipe and returns the server's
// CPU time for it.
func pipeHandshake(b *testing.B, client, server *tls.Config) time.Duration {
	cc, sc := net.Pipe()
	cpu := make(chan time.Duration, 1)
	go func() {
		defer sc.Close()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		start := threadCPU(b)
		_ = tls.Server(sc, server).Handshake()
		cpu <- threadCPU(b) - start
	}()
	tc := tls.Client(cc, client)
	_ = cc.SetDeadline(time.Now().Add(testTimeout))
	if err := tc.Handshake(); err == nil {
		_, _ = tc.Read(make([]byte, 1)) // the tickets or the alert, then the end
	}
	_ = cc.Close()
	return <-cpu
}

// threadCPU is the CPU time of the calling thread (it may run on any
// goroutine, so it reports a failure with Error).
func threadCPU(b *testing.B) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		b.Error(err)
	}
	return time.Duration(ts.Nano())
}
