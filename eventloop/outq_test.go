package eventloop

import (
	"bytes"
	"context"
	"net"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/monolock/monolock/protocol"
)

// Output that waits in the kernel's send queue counts as undrained output
// too: a peer that acknowledges none of it for io-timeout is closed, one
// that acknowledges some keeps a fresh clock, and an empty queue ends the
// stall. The queue is looked at once per outputCheck bytes written, not per
// reply.
func TestRuleIOTimeoutOutputInTheKernel(t *testing.T) {
	reply := len(protocol.AppendAcquired(nil, 1))
	burst := bytes.Repeat(heartbeat, outputCheck/reply+1) // answers past outputCheck
	for _, tc := range []struct {
		name   string
		during func(h peer) // at every 300 ms of the stall
		closed bool
	}{
		{"never acknowledged", func(peer) {}, true},
		{"acknowledged bit by bit", func(h peer) { h.kernelAcked += 100 }, false},
		{"drained", func(h peer) { h.kernelQueued = 0 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const io = time.Second
			r := newRig(t, Config{IOTimeout: io})
			h, t1 := r.claim("k", farLeaseMS)
			w, _ := r.claim("k", farLeaseMS)
			h.kernelQueued, h.kernelAcked = 4000, 1 // the peer's window is shut
			r.send(h.fakeConn, heartbeat)
			h.takeReads()
			if h.kernelLooks != 0 || h.s.stalledSince != 0 {
				t.Fatalf("one reply: %d looks at the kernel, stalled since %v; want none", h.kernelLooks, h.s.stalledSince)
			}
			r.send(h.fakeConn, burst)
			h.takeReads()
			start := r.now()
			if h.kernelLooks != 1 || h.s.stalledSince != start {
				t.Fatalf("%d bytes of answers: %d looks at the kernel, stalled since %v; want 1 and %v", len(burst)/len(heartbeat)*reply, h.kernelLooks, h.s.stalledSince, start)
			}
			for at := 300 * ms; at < 3*io; at += 300 * ms {
				r.until(start + at)
				if h.closed {
					break
				}
				tc.during(h)
			}
			if !tc.closed {
				r.expectOpen(h, "a peer that acknowledges its output")
				r.quiet(w, "waiter")
				return
			}
			r.expectClosed(h, ReleaseIOTimeout, start+io, start+io+stallPoll)
			r.expectPromoted(w, t1)
		})
	}
}

// releases records why holders let go.
type releases struct {
	noMetrics
	reasons chan string
}

func (r releases) Released(reason ReleaseReason, _ time.Duration) { r.reasons <- reason.String() }

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
		if reason != ReleaseIOTimeout.String() {
			t.Fatalf("the client that never reads was released for %q; want %q", reason, ReleaseIOTimeout)
		}
	case <-time.After(30 * time.Second): // a net against a hung test: the lease is 10 minutes
		t.Fatal("the client that never reads is still open")
	}
}

// A tick runs at most firesPerTick timers; the rest run at the next ticks,
// a wheel tick apart, so the loop polls its sockets between them. None runs
// early.
func TestRuleTimersPerTickAreBounded(t *testing.T) {
	const io = time.Second
	r := newRig(t, Config{IOTimeout: io})
	conns := make([]*fakeConn, 3*firesPerTick+1) // none ever sends ACQUIRE
	for i := range conns {
		conns[i] = r.connect()
	}
	deadline := r.now() + io
	r.until(deadline - 1)
	closed := func() (n int) {
		for _, c := range conns {
			if c.closed {
				n++
			}
		}
		return n
	}
	if n := closed(); n != 0 {
		t.Fatalf("%d closed before io-timeout", n)
	}
	for ticks := 1; closed() < len(conns); ticks++ {
		at, ok := r.o.wakeup.planned()
		if !ok {
			t.Fatalf("%d of %d closed and no tick planned", closed(), len(conns))
		}
		r.until(max(at, deadline))
		r.tick()
		if n := closed(); n > ticks*firesPerTick {
			t.Fatalf("%d ticks closed %d sessions; at most %d per tick", ticks, n, firesPerTick)
		}
		if ticks > len(conns) {
			t.Fatal("the deferred timers never ran")
		}
	}
	last := time.Duration(0)
	for _, c := range conns {
		last = max(last, c.closedAt)
	}
	if want := deadline + time.Duration(len(conns)/firesPerTick+1)*wheelTick; last > want {
		t.Fatalf("the last deferred timer ran at %v; want by %v", last, want)
	}
}
