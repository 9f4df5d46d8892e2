package faultproxy

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// quiet is how long a test watches for bytes that must not arrive. A negative
// check can only ever be bounded; a frozen proxy holds bytes indefinitely.
const quiet = 100 * time.Millisecond

// setup starts a target that hands its accepted connections to the test, a
// proxy in front of it, and one connection through the proxy.
func setup(t *testing.T) (p *Proxy, client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	p, err = New(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	client, err = net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	select {
	case server = <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("proxy did not connect to the target")
	}
	t.Cleanup(func() { _ = server.Close() })
	return p, client, server
}

func send(t *testing.T, c net.Conn, s string) {
	t.Helper()
	if _, err := c.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
}

func expect(t *testing.T, c net.Conn, want string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("reading %q: %v", want, err)
	}
	if string(got) != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func expectNothing(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(quiet))
	var b [1]byte
	n, err := c.Read(b[:])
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %d bytes, %v while frozen; want nothing", n, err)
	}
}

func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b [1]byte
	if n, err := c.Read(b[:]); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %d bytes, %v; want the connection closed", n, err)
	}
}

func TestForwardsBothWays(t *testing.T) {
	_, client, server := setup(t)
	send(t, client, "ping")
	expect(t, server, "ping")
	send(t, server, "pong")
	expect(t, client, "pong")
}

func TestFreezeHoldsBytesUntilThaw(t *testing.T) {
	for _, tc := range []struct {
		name     string
		dir      Direction
		from, to func(client, server net.Conn) net.Conn
	}{
		{"client to server", ClientToServer, first, second},
		{"server to client", ServerToClient, second, first},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, client, server := setup(t)
			from, to := tc.from(client, server), tc.to(client, server)
			p.Freeze(tc.dir)
			send(t, from, "held")
			expectNothing(t, to)
			// The other direction is not frozen.
			send(t, to, "free")
			expect(t, from, "free")
			p.Thaw(tc.dir)
			expect(t, to, "held")
		})
	}
}

func first(a, _ net.Conn) net.Conn  { return a }
func second(_, b net.Conn) net.Conn { return b }

func TestFreezeBothHoldsClose(t *testing.T) {
	p, client, server := setup(t)
	p.Freeze(Both)
	send(t, client, "last words")
	_ = client.Close()
	expectNothing(t, server)
	p.Thaw(Both)
	expect(t, server, "last words")
	expectClosed(t, server)
}

func TestCutAllClosesBothEnds(t *testing.T) {
	p, client, server := setup(t)
	p.Freeze(ClientToServer)
	send(t, client, "dropped")
	p.CutAll()
	expectClosed(t, client)
	expectClosed(t, server)

	// The proxy keeps accepting.
	p.Thaw(Both)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
}

func TestSetDelayDelaysEachDirection(t *testing.T) {
	p, client, server := setup(t)
	const d = 50 * time.Millisecond
	p.SetDelay(d)
	start := time.Now()
	send(t, client, "a")
	expect(t, server, "a")
	send(t, server, "b")
	expect(t, client, "b")
	if rtt := time.Since(start); rtt < 2*d {
		t.Fatalf("round trip took %v, want at least %v", rtt, 2*d)
	}
	p.SetDelay(0)
	send(t, client, "c")
	expect(t, server, "c")
}

func TestCloseStopsEverything(t *testing.T) {
	p, client, server := setup(t)
	p.Freeze(Both) // Close must not wait for a thaw
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, client)
	expectClosed(t, server)
	if c, err := net.Dial("tcp", p.Addr()); err == nil {
		_ = c.Close()
		t.Fatal("dial after Close succeeded")
	}
}

func TestUnreachableTargetClosesClient(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := ln.Addr().String()
	_ = ln.Close()
	p, err := New(target)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	expectClosed(t, c)
}
