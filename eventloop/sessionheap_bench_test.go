package eventloop_test

import (
	"crypto/tls"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/rs/zerolog"

	"github.com/monolock/monolock/eventloop"
	"github.com/monolock/monolock/internal/certs"
	"github.com/monolock/monolock/internal/certs/certstest"
	"github.com/monolock/monolock/internal/testsupport/wire"
	"github.com/monolock/monolock/protocol"
	"github.com/monolock/monolock/protocol/admin"
)

// BenchmarkSessionHeap measures the server's live heap per established
// session: b.N clients (run it with -benchtime 2000x) each hold a lock of
// their own and have had one heartbeat answered. Only memory whose
// allocation stack passes through the server (eventloop or gnet) is counted,
// so the in-process clients do not inflate the figure, and the allocation
// sites that keep the most are logged. RSS is larger by the collector's
// headroom; bench S6 measures that from outside.
//
// "mTLS, classic key share" is a client that offers only X25519: Go clients
// also send a 1.2 KB post-quantum key share by default, and crypto/tls keeps
// buffers sized by the ClientHello for the connection's life. "mTLS, chain at
// the bounds" presents the largest chain the server accepts in count and SANs
// (internal/certs' chain bounds): crypto/tls keeps every certificate of it,
// parsed, for the session's life.
func BenchmarkSessionHeap(b *testing.B) {
	modes := []struct {
		name            string
		tls, clientCert bool
		classicKeyShare bool
		chain           *certstest.ChainOptions // the client's chain, when not certstest.ClientURI's
	}{
		{name: "plain"},
		{name: "TLS", tls: true},
		{name: "mTLS", tls: true, clientCert: true},
		{name: "mTLS, classic key share", tls: true, clientCert: true, classicKeyShare: true},
		{name: "mTLS, chain at the bounds", tls: true, clientCert: true, chain: &certstest.ChainOptions{
			Intermediates: certs.MaxClientChainCerts - 1, SANs: certs.MaxClientCertSANs - 1,
		}},
	}
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) {
			n := min(b.N, sessionBudget(b))
			prev := runtime.MemProfileRate
			runtime.MemProfileRate = 1
			defer func() { runtime.MemProfileRate = prev }()

			cfg := eventloop.Config{ListenAddress: "127.0.0.1:0", Logger: zerolog.Nop()}
			var opts wire.Options
			if m.tls {
				pki := certstest.NewPKI(b, b.TempDir())
				files := certs.Files{Cert: pki.Server.Cert, Key: pki.Server.Key}
				client := ""
				if m.clientCert {
					files.ClientCA = pki.CA
					client = certstest.ClientURI
				}
				tc, err := certs.Load(files)
				if err != nil {
					b.Fatal(err)
				}
				cfg.TLS, cfg.Identity = tc, certs.Identity
				opts.TLS = pki.ClientTLS(client)
				if m.chain != nil {
					chain, err := pki.ClientChainOfSize(*m.chain, certs.MaxClientChainBytes)
					if err != nil {
						b.Fatal(err)
					}
					opts.TLS = pki.WithCertificate(chain)
				}
				if m.classicKeyShare {
					opts.TLS.CurvePreferences = []tls.CurveID{tls.X25519}
				}
			}
			ts := startServerConfig(b, cfg)
			_ = wire.MustDial(b, ts.Addr().String(), opts).NC.Close() // every server goroutine is up
			ts.waitStats(b, admin.Stats{})

			before := serverHeap()
			b.ResetTimer()
			openSessions(b, ts, opts, n)
			b.StopTimer()
			ts.waitStats(b, admin.Stats{Sessions: n, Locks: n, Timers: n})
			after := serverHeap()

			total := after.total - before.total
			b.ReportMetric(float64(total)/float64(n), "server-heap-B/session")
			b.ReportMetric(0, "ns/op")
			if n < 100 {
				return // too few sessions for the sites to mean anything
			}
			b.Logf("%d sessions, %d B of server heap each; the sites that keep most:", n, total/int64(n))
			grown := after.minus(before)
			for _, s := range grown[:min(12, len(grown))] {
				b.Logf("%7.0f B  %s", float64(s.n)/float64(n), s.site)
			}
		})
	}
}

// sessionBudget is how many sessions fit the descriptor limit: each costs one
// descriptor here and one in the server.
func sessionBudget(b *testing.B) int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		b.Fatalf("getrlimit: %v", err)
	}
	return max(1, (int(rl.Cur)-256)/2)
}

// openSessions opens n sessions, eight at a time, each holding lock "heap/i"
// and heartbeating once.
func openSessions(b *testing.B, ts *testServer, opts wire.Options, n int) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				c, _ := wire.Holder(b, ts.Addr().String(), opts, fmt.Sprintf("heap/%d", i), longLease)
				c.SendHeartbeat()
				c.Expect(protocol.TypeAcquired)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// heapSites is the server's share of a memory profile, by allocation site.
type heapSites struct {
	total int64
	sites map[string]int64
}

type heapSite struct {
	site string
	n    int64 // bytes or objects
}

// serverHeap is the server's live heap, in bytes.
func serverHeap() heapSites {
	return serverProfile(func(r runtime.MemProfileRecord) int64 { return r.InUseBytes() })
}

// serverAllocations counts the objects the server has allocated so far.
func serverAllocations() heapSites {
	return serverProfile(func(r runtime.MemProfileRecord) int64 { return r.AllocObjects })
}

// serverProfile reads the memory profile after two collections (the profile
// is as of the last completed one), keeps the records allocated on the
// server's side, including sites whose objects have all been freed, and adds
// up count over them, by site.
func serverProfile(count func(runtime.MemProfileRecord) int64) heapSites {
	runtime.GC()
	runtime.GC()
	var records []runtime.MemProfileRecord
	for {
		n, ok := runtime.MemProfile(records, true)
		if ok {
			records = records[:n]
			break
		}
		records = make([]runtime.MemProfileRecord, n+64)
	}
	h := heapSites{sites: make(map[string]int64)}
	for _, r := range records {
		site, server := allocationSite(r.Stack())
		if !server {
			continue
		}
		h.total += count(r)
		h.sites[site] += count(r)
	}
	return h
}

// allocationSite names a stack by its allocating function and the nearest
// frame in crypto/tls or the server, and says whether the server made it.
func allocationSite(stack []uintptr) (string, bool) {
	frames := runtime.CallersFrames(stack)
	var alloc, owner string
	server := false
	for {
		f, more := frames.Next()
		fn := f.Function
		switch {
		case alloc == "" && !strings.HasPrefix(fn, "runtime."):
			alloc = fn
		case owner == "" && alloc != "" && (strings.HasPrefix(fn, "crypto/tls.") || strings.HasPrefix(fn, "github.com/")):
			owner = fn
		}
		if strings.HasPrefix(fn, "github.com/monolock/monolock/eventloop.") || strings.HasPrefix(fn, "github.com/panjf2000/gnet/") {
			server = true
		}
		if !more {
			break
		}
	}
	if owner != "" && owner != alloc {
		return alloc + " ← " + owner, server
	}
	return alloc, server
}

// minus is the growth of each site from before to h, largest first.
func (h heapSites) minus(before heapSites) []heapSite {
	var out []heapSite
	for site, n := range h.sites {
		if d := n - before.sites[site]; d > 0 {
			out = append(out, heapSite{site, d})
		}
	}
	slices.SortFunc(out, func(a, b heapSite) int { return int(b.n - a.n) })
	return out
}
