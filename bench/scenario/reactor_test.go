package scenario

import (
	"encoding/binary"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monolock/monolock/bench/check"
	"github.com/monolock/monolock/bench/clock"
	"github.com/monolock/monolock/bench/floor"
	"github.com/monolock/monolock/protocol"
)

// fakeServer accepts connections and hands each one to serve.
func fakeServer(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveConns(t, ln, serve)
}

// serveConns accepts connections on ln and hands each one to serve on its
// own goroutine, until the test ends; it returns ln's address.
func serveConns(t *testing.T, ln net.Listener, serve func(net.Conn)) string {
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer func() { _ = c.Close() }()
				serve(c)
			})
		}
	})
	return ln.Addr().String()
}

// readAcquire reads one ACQUIRE frame.
func readAcquire(r io.Reader) error {
	hdr := make([]byte, protocol.AcquireHeaderLen)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return err
	}
	_, err := io.ReadFull(r, make([]byte, binary.BigEndian.Uint16(hdr[6:])))
	return err
}

func TestReactorEcho(t *testing.T) {
	clk := clock.New()
	addr := fakeServer(t, func(c net.Conn) {
		b := make([]byte, 64)
		for {
			n, err := c.Read(b)
			if err != nil {
				return
			}
			for range n {
				if _, err := c.Write([]byte(floor.Reply)); err != nil {
					return
				}
			}
		}
	})
	l := &echoLoad{conns: 4, win: clk.Window(20*time.Millisecond, 100*time.Millisecond)}
	if err := runLoad(clk, addr, l); err != nil {
		t.Fatal(err)
	}
	if l.count == 0 || l.hist.Count() != l.count {
		t.Fatalf("count %d, histogram %d", l.count, l.hist.Count())
	}
}

// A server that grants every ACQUIRE, to all clients at the same moment and
// with the same token, breaks both rules: the harness must see both.
func TestHandoverLoadCatchesABrokenServer(t *testing.T) {
	clk := clock.New()
	const clients = 3
	var (
		mu      sync.Mutex
		waiting []net.Conn
	)
	addr := fakeServer(t, func(c net.Conn) {
		if readAcquire(c) != nil {
			return
		}
		mu.Lock()
		waiting = append(waiting, c)
		if len(waiting) == clients { // grant the whole batch at once
			for _, w := range waiting {
				_, _ = w.Write(protocol.AppendAcquired(nil, 42))
			}
			waiting = nil
		}
		mu.Unlock()
		_, _ = io.Copy(io.Discard, c)
	})
	// The grants land in one batch of events nearly always; retry a few
	// times so that a slow scheduler cannot make the test flaky.
	var v string
	for range 20 {
		chk := check.New()
		l := newHandoverLoad(clients, "L", time.Minute, chk, clk.Window(0, 60*time.Millisecond))
		if err := runLoad(clk, addr, l); err != nil {
			t.Fatal(err)
		}
		v = strings.Join(chk.Violations(), "\n")
		if strings.Contains(v, "two holders") && strings.Contains(v, "token") {
			return
		}
	}
	t.Fatalf("violations not seen; got:\n%s", v)
}

// A correct one-lock server (FIFO queue, push on release, increasing
// tokens) leaves the checker silent.
func TestHandoverLoadAgainstACorrectServer(t *testing.T) {
	clk := clock.New()
	var (
		mu     sync.Mutex
		holder net.Conn
		queue  []net.Conn
		token  uint64
	)
	grant := func(c net.Conn) { // mu held
		holder = c
		token++
		_, _ = c.Write(protocol.AppendAcquired(nil, token))
	}
	addr := fakeServer(t, func(c net.Conn) {
		if readAcquire(c) != nil {
			return
		}
		mu.Lock()
		if holder == nil {
			grant(c)
		} else {
			queue = append(queue, c)
			_, _ = c.Write(protocol.AppendWaiting(nil))
		}
		mu.Unlock()
		_, _ = io.Copy(io.Discard, c) // until the client closes
		mu.Lock()
		defer mu.Unlock()
		if holder != c {
			for i, q := range queue {
				if q == c {
					queue = append(queue[:i], queue[i+1:]...)
					break
				}
			}
			return
		}
		holder = nil
		if len(queue) > 0 {
			next := queue[0]
			queue = queue[1:]
			grant(next)
		}
	})
	chk := check.New()
	l := newHandoverLoad(4, "L", time.Minute, chk, clk.Window(20*time.Millisecond, 150*time.Millisecond))
	if err := runLoad(clk, addr, l); err != nil {
		t.Fatal(err)
	}
	if v := chk.Violations(); len(v) > 0 {
		t.Fatalf("violations against a correct server: %v", v)
	}
	if l.count == 0 {
		t.Fatal("no handover measured")
	}
}
