package opshttp

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/monolock/monolock/internal/testsupport/keepalive"
	"github.com/monolock/monolock/internal/testsupport/poll"
)

// safety bounds a wait for an event that should come at once.
const safety = 30 * time.Second

func TestMaxConns(t *testing.T) {
	for _, c := range []struct {
		nofile uint64
		want   int
	}{{1 << 20, 64}, {1024, 64}, {256, 16}, {20, 1}, {0, 1}} {
		if got := MaxConns(c.nofile); got != c.want {
			t.Errorf("MaxConns(%d) = %d, want %d", c.nofile, got, c.want)
		}
	}
}

// TestNewServerIsBounded: no timeout is left at net/http's zero, which means
// forever.
func TestNewServerIsBounded(t *testing.T) {
	hs := NewServer(http.NotFoundHandler(), DefaultLimits(1024), zerolog.Nop())
	if hs.ReadHeaderTimeout <= 0 || hs.ReadTimeout <= 0 || hs.WriteTimeout <= 0 || hs.IdleTimeout <= 0 || hs.ErrorLog == nil {
		t.Errorf("unbounded server: %+v", hs)
	}
}

// lines collects zerolog's JSON lines.
type lines chan map[string]any

func (c lines) Write(p []byte) (int, error) {
	var m map[string]any
	if err := json.Unmarshal(p, &m); err != nil {
		return 0, err
	}
	c <- m
	return len(p), nil
}

// TestErrorLogGoesThroughZerolog: net/http's own complaints come out as
// structured lines, not as bare text on stderr.
func TestErrorLogGoesThroughZerolog(t *testing.T) {
	got := make(lines, 200) // room for every line the sampling should drop
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.WriteHeader(http.StatusTeapot) // net/http logs the superfluous call
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := NewServer(h, DefaultLimits(1024), zerolog.New(got))
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	resp, err := http.Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	select {
	case line := <-got:
		if line["level"] != "error" || !strings.Contains(line["message"].(string), "superfluous response.WriteHeader") {
			t.Errorf("line %v", line)
		}
	case <-time.After(safety):
		t.Fatal("net/http's error line did not reach the zerolog logger")
	}
	el := ErrorLog(zerolog.New(got))
	el.Print("http: TLS handshake error from 127.0.0.1:5555: EOF\n")
	if line := <-got; line["level"] != "warn" || line["message"] != "http: TLS handshake error from 127.0.0.1:5555: EOF" {
		t.Errorf("TLS handshake line %v, want a warning without the newline", line)
	}
	// A client failing its handshakes in a loop: the burst is logged, then
	// no more (the burst is 10 a second; these calls take microseconds).
	for range 100 {
		el.Print("http: TLS handshake error from 127.0.0.1:5555: EOF\n")
	}
	if n := len(got); n != handshakeErrorsPerSecond-1 {
		t.Errorf("101 handshake errors logged %d lines after the first, want the rest of the burst, %d", n, handshakeErrorsPerSecond-1)
	}
}

// TestLimitListener: past the cap, with no connection idle, Accept waits for
// one to close; clients beyond the one it holds wait in the backlog.
func TestLimitListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := LimitListener(&http.Server{}, inner, 2, nil) // no connection is ever idle
	defer ln.Close()
	accepted := make(chan net.Conn, 3)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	for range 3 {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	first, second := <-accepted, <-accepted
	// A listener without the cap takes the third at once; give it ample
	// time to. This cannot fail spuriously: a capped listener never does.
	select {
	case <-accepted:
		t.Fatal("a third connection was accepted with a cap of 2")
	case <-time.After(100 * time.Millisecond):
	}
	_ = first.Close()
	select {
	case third := <-accepted:
		_ = third.Close()
	case <-time.After(safety):
		t.Fatal("closing a connection did not free its slot")
	}
	_ = first.Close() // a second Close must not free a second slot
	_ = second.Close()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-accepted; ok {
		t.Fatal("Accept returned a connection after Close")
	}
}

// TestIdleConnectionIsClosed: a keep-alive connection that sends nothing
// more is closed after IdleTimeout.
func TestIdleConnectionIsClosed(t *testing.T) {
	lim := DefaultLimits(1024)
	lim.IdleTimeout = 50 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := NewServer(http.NotFoundHandler(), lim, zerolog.Nop())
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(safety))
	r := bufio.NewReader(c)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if _, err := r.ReadByte(); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("idle connection: read %v, want it closed by the server", err)
	}
}

// TestIdleConnectionsYieldToNewOnes: with the cap taken by idle keep-alive
// connections, a new client is served at once, and the connection idle the
// longest is closed for it.
func TestIdleConnectionsYieldToNewOnes(t *testing.T) {
	lim := DefaultLimits(1024)
	lim.IdleTimeout = time.Hour // only the cap may close them
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := NewServer(http.NotFoundHandler(), lim, zerolog.Nop())
	// The server marks a connection idle just after the client has its
	// answer; wait for the mark, so that "the longest idle" is well defined.
	idle := make(chan struct{}, 10)
	hs.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateIdle {
			idle <- struct{}{}
		}
	}
	ln := LimitListener(hs, inner, 2, nil)
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	addr := inner.Addr().String()

	older, newer := keepalive.Dial(t, addr), keepalive.Dial(t, addr)
	awaitIdle := func() {
		t.Helper()
		select {
		case <-idle:
		case <-time.After(safety):
			t.Fatal("LimitListener did not pass connection states on to the server's own ConnState")
		}
	}
	older.Get(t, "/")
	awaitIdle()
	newer.Get(t, "/")
	awaitIdle()
	if code := keepalive.Dial(t, addr).Get(t, "/"); code != http.StatusNotFound {
		t.Fatalf("third client: status %d", code)
	}
	if _, err := older.R.ReadByte(); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("the longest idle connection: read %v, want it closed", err)
	}
	if code := newer.Get(t, "/"); code != http.StatusNotFound {
		t.Fatalf("the newer idle connection was closed too: status %d", code)
	}
}

// TestEvictionOrder: at the cap, a new client is served by closing the
// connection that has waited for a request header the longest, a slow new
// one or an idle keep-alive one alike; a request whose header is in is never
// closed for it.
func TestEvictionOrder(t *testing.T) {
	lim := DefaultLimits(1024)
	lim.ReadHeaderTimeout, lim.IdleTimeout = time.Hour, time.Hour // only the cap may close them
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("/block", func(http.ResponseWriter, *http.Request) { <-release })
	hs := NewServer(mux, lim, zerolog.Nop())
	type change struct {
		client string
		st     http.ConnState
	}
	changes := make(chan change, 100)
	hs.ConnState = func(c net.Conn, st http.ConnState) { changes <- change{c.RemoteAddr().String(), st} }
	ln := LimitListener(hs, inner, 3, nil)
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	addr := inner.Addr().String()
	await := func(c *keepalive.Conn, st http.ConnState) {
		t.Helper()
		for {
			select {
			case ch := <-changes:
				if ch.client == c.LocalAddr().String() && ch.st == st {
					return
				}
			case <-time.After(safety):
				t.Fatalf("%s never reached %v", c.LocalAddr(), st)
			}
		}
	}
	closed := func(c *keepalive.Conn) bool {
		_ = c.SetReadDeadline(time.Now().Add(safety))
		_, err := c.R.ReadByte()
		return err != nil && !strings.Contains(err.Error(), "timeout")
	}

	slow := keepalive.Dial(t, addr) // sends half a header and stalls
	await(slow, http.StateNew)
	if _, err := slow.Write([]byte("GET / HTTP/1.1\r\n")); err != nil {
		t.Fatal(err)
	}
	// Await the server's read of that half (a slow client is one that has
	// sent part of a header), not time.
	poll.Eventually(t, safety, func() error {
		ll := ln.(*limitListener)
		ll.mu.Lock()
		defer ll.mu.Unlock()
		for c := range ll.waiting {
			if c.RemoteAddr().String() == slow.LocalAddr().String() && c.(*limitConn).heard.Load() {
				return nil
			}
		}
		return errors.New("the server has not read the slow client's half header")
	})
	idle := keepalive.Dial(t, addr)
	if code := idle.Get(t, "/"); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	await(idle, http.StateIdle)
	busy := keepalive.Dial(t, addr)
	busy.Send(t, "/block")
	await(busy, http.StateActive)

	first := keepalive.Dial(t, addr)
	if code := first.Get(t, "/"); code != http.StatusOK {
		t.Fatalf("a client at the cap: status %d", code)
	}
	if !closed(slow) {
		t.Fatal("the slow client, waiting for its header the longest, was not the one closed")
	}
	await(first, http.StateIdle)
	second := keepalive.Dial(t, addr)
	if code := second.Get(t, "/"); code != http.StatusOK {
		t.Fatalf("a second client at the cap: status %d", code)
	}
	if !closed(idle) {
		t.Fatal("the idle client, then waiting the longest, was not the one closed")
	}
	close(release)
	resp, err := http.ReadResponse(busy.R, nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the request in progress: %v, %v; want it answered", resp, err)
	}
	_ = resp.Body.Close()
}
