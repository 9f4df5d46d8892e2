package eventloop

import (
	"bytes"
	"context"
	"net"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/monolock/monolock/locktable"
	"github.com/monolock/monolock/protocol"
)

// The rules on output the kernel holds are scripts
// (testdata/rules/io_timeout.txt); this file checks them over a real socket.

// releases records why holders let go.
type releases struct {
	noMetrics
	reasons chan string
}

func (r releases) Released(reason locktable.ReleaseReason, _ time.Duration) {
	r.reasons <- reason.String()
}

// Over a real socket: a client that pipelines heartbeats and never reads
// gets every answer written, which the kernel holds rather than gnet, and is
// closed after io-timeout all the same, long before its lease ends.
func TestClientThatNeverReadsIsClosedOverTCP(t *testing.T) {
	rec := releases{reasons: make(chan string, 1)}
	srv, err := New(Config{ListenAddress: "127.0.0.1:0", IOTimeout: 300 * time.Millisecond, Logger: zerolog.Nop(), Metrics: rec})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Error(err)
		}
		if err := <-served; err != nil {
			t.Error(err)
		}
	}()

	nc, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.(*net.TCPConn).SetReadBuffer(4 << 10) // the client's share fills at once
	_ = nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	const beats = 50_000 // answers: hundreds of KiB, far past outputCheck
	burst := append(protocol.AppendAcquire(nil, 600_000, "never-reads"), bytes.Repeat(heartbeat, beats)...)
	if _, err := nc.Write(burst); err != nil {
		t.Fatalf("the pipelined burst: %v", err)
	}
	select {
	case reason := <-rec.reasons:
		if reason != locktable.ReleaseIOTimeout.String() {
			t.Fatalf("the client that never reads was released for %q; want %q", reason, locktable.ReleaseIOTimeout)
		}
	case <-time.After(30 * time.Second): // a net against a hung test: the lease is 10 minutes
		t.Fatal("the client that never reads is still open")
	}
}
