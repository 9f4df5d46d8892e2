package eventloop_test

import (
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/monolock/monolock/internal/certs/certstest"
	"github.com/monolock/monolock/protocol/admin"
)

// BenchmarkPendingHandshakeMemory measures what one stalled connection makes
// the server hold, as heap and stacks in use per connection, for a plain
// connection that sends nothing and for TLS ones that send nothing, part of
// a ClientHello, or a whole ClientHello and then nothing (the server's
// handshake goroutine waits for its last flight). The clients' side is one
// bare socket each and is included. Run it with -benchtime=1x.
func BenchmarkPendingHandshakeMemory(b *testing.B) {
	const n = 200
	partial := []byte{22, 3, 1, 2, 0, 1, 0, 1, 252, 3, 3}
	b.Run("plain-silent", func(b *testing.B) {
		ts := startServer(b, time.Hour)
		pendingMemory(b, ts, n, nil)
	})
	ts, pki := startTLSServer(b, time.Hour, 0)
	hello := recordClientHello(b, pki)
	b.Run("tls-silent", func(b *testing.B) { pendingMemory(b, ts, n, nil) })
	b.Run("tls-partial-hello", func(b *testing.B) { pendingMemory(b, ts, n, partial) })
	b.Run("tls-hello-then-stall", func(b *testing.B) { pendingMemory(b, ts, n, hello) })
}

func pendingMemory(b *testing.B, ts *testServer, n int, send []byte) {
	for range b.N {
		ts.waitStatsFunc(b, "no sessions", func(st admin.Stats) bool { return st.Sessions == 0 })
		before := inUse()
		conns := make([]net.Conn, n)
		for i := range conns {
			c, err := net.DialTimeout("tcp", ts.Addr().String(), safety)
			if err != nil {
				b.Fatal(err)
			}
			conns[i] = c
			if send != nil {
				if _, err := c.Write(send); err != nil {
					b.Fatal(err)
				}
			}
		}
		ts.waitStatsFunc(b, "every connection open", func(st admin.Stats) bool { return st.Sessions == n })
		if len(send) > 64 { // a whole hello: the server answers with its flight
			for _, c := range conns {
				_ = c.SetReadDeadline(time.Now().Add(safety))
				if _, err := io.ReadFull(c, make([]byte, 5)); err != nil {
					b.Fatal(err)
				}
			}
		}
		after := inUse()
		b.ReportMetric(float64(after-before)/float64(n), "bytes/conn")
		for _, c := range conns {
			_ = c.Close()
		}
	}
}

func inUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse + m.StackInuse)
}

// recordClientHello returns the first flight of a mutual-TLS client of pki:
// one record holding its ClientHello.
func recordClientHello(b *testing.B, pki *certstest.PKI) []byte {
	client, server := net.Pipe()
	defer server.Close()
	go func() {
		_ = tls.Client(client, pki.ClientTLS(certstest.ClientURI)).Handshake()
		_ = client.Close()
	}()
	hdr := make([]byte, 5)
	if _, err := io.ReadFull(server, hdr); err != nil {
		b.Fatal(err)
	}
	body := make([]byte, binary.BigEndian.Uint16(hdr[3:]))
	if _, err := io.ReadFull(server, body); err != nil {
		b.Fatal(err)
	}
	return append(hdr, body...)
}
