package eventloop_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/monolock/monolock/eventloop"
	"github.com/monolock/monolock/protocol"
)

// safety bounds every blocking wait of these tests. It is a net against a hung
// test, never a timing assertion: the awaited event normally comes in
// microseconds.
const safety = 5 * time.Second

// longLease is a lease no test outlives, for sessions that never heartbeat.
const longLease = 120_000

// testServer is a server running in-process on a loopback port.
type testServer struct {
	*eventloop.Server
	served chan error // receives Serve's result
	down   bool       // Shutdown was called by the test itself
}

// startServer starts a server on 127.0.0.1 with the given io-timeout (0: the
// default) and shuts it down when the test ends.
func startServer(t testing.TB, ioTimeout time.Duration) *testServer {
	t.Helper()
	return startServerConfig(t, eventloop.Config{
		ListenAddress: "127.0.0.1:0",
		IOTimeout:     ioTimeout,
		Logger:        zerolog.Nop(),
	})
}

// startServerConfig starts a server with cfg and shuts it down when the test
// ends.
func startServerConfig(t testing.TB, cfg eventloop.Config) *testServer {
	t.Helper()
	srv, err := eventloop.New(cfg)
	if err != nil {
		t.Fatalf("eventloop.New: %v", err)
	}
	ts := &testServer{Server: srv, served: make(chan error, 1)}
	go func() { ts.served <- srv.Serve() }()
	t.Cleanup(func() {
		if ts.down {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), safety)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		select {
		case err := <-ts.served:
			if err != nil {
				t.Errorf("Serve returned %v after Shutdown, want nil", err)
			}
		case <-time.After(safety):
			t.Errorf("Serve did not return within %v of Shutdown", safety)
		}
	})
	return ts
}

// shutdown shuts ts down from the test itself: Shutdown and then Serve must
// return nil, Serve within safety.
func (ts *testServer) shutdown(t testing.TB, ctx context.Context) {
	t.Helper()
	ts.down = true
	if err := ts.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	select {
	case err := <-ts.served:
		if err != nil {
			t.Fatalf("Serve returned %v, want nil", err)
		}
	case <-time.After(safety):
		t.Fatalf("Serve did not return within %v of Shutdown", safety)
	}
}

// stats reads the server's counters.
func (ts *testServer) stats(t testing.TB) eventloop.Stats {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	st, err := ts.Stats(ctx)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	return st
}

// waitStats polls Stats until it equals want; the server reaches the state
// asynchronously (a client's close is an event the server handles later).
func (ts *testServer) waitStats(t testing.TB, want eventloop.Stats) {
	t.Helper()
	ts.waitStatsFunc(t, fmt.Sprintf("%+v", want), func(st eventloop.Stats) bool { return st == want })
}

// waitStatsFunc polls Stats until ok accepts it.
func (ts *testServer) waitStatsFunc(t testing.TB, what string, ok func(eventloop.Stats) bool) {
	t.Helper()
	deadline := time.Now().Add(safety)
	for {
		st := ts.stats(t)
		if ok(st) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Stats = %+v, still not %s after %v", st, what, safety)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// conn is a raw protocol client: bytes out, frames in, nothing hidden.
type conn struct {
	t     testing.TB
	label string
	nc    *net.TCPConn
	buf   protocol.FrameBuffer
}

// dial opens a connection to ts and closes it when the test ends.
func dial(t testing.TB, ts *testServer, label string) *conn {
	t.Helper()
	c, err := dialErr(ts, label)
	if err != nil {
		t.Fatalf("%s: %v", label, err)
	}
	c.t = t
	t.Cleanup(func() { _ = c.nc.Close() })
	return c
}

// dialErr opens a connection without a test to report to (for goroutines);
// the caller closes it.
func dialErr(ts *testServer, label string) (*conn, error) {
	nc, err := net.DialTimeout("tcp", ts.Addr().String(), safety)
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	tc := nc.(*net.TCPConn)
	// Go sets TCP_NODELAY by default; make it explicit, the byte-by-byte tests
	// rely on each write leaving as its own segment.
	if err := tc.SetNoDelay(true); err != nil {
		_ = tc.Close()
		return nil, err
	}
	return &conn{label: label, nc: tc}, nil
}

// acquireFrame builds a valid ACQUIRE.
func acquireFrame(name string, leaseMS uint32) []byte {
	return protocol.AppendAcquire(nil, leaseMS, name)
}

// rawAcquire builds an ACQUIRE with every field chosen by the caller, valid or
// not; name is appended as is whatever nameLen says.
func rawAcquire(version uint8, leaseMS uint32, nameLen uint16, name []byte) []byte {
	b := []byte{byte(protocol.TypeAcquire), version}
	b = binary.BigEndian.AppendUint32(b, leaseMS)
	b = binary.BigEndian.AppendUint16(b, nameLen)
	return append(b, name...)
}

var heartbeat = []byte{byte(protocol.TypeHeartbeat)}

func (c *conn) writeErr(b []byte) error {
	if err := c.nc.SetWriteDeadline(time.Now().Add(safety)); err != nil {
		return err
	}
	_, err := c.nc.Write(b)
	return err
}

func (c *conn) send(b []byte) {
	c.t.Helper()
	if err := c.writeErr(b); err != nil {
		c.t.Fatalf("%s: write %x: %v", c.label, b, err)
	}
}

func (c *conn) sendAcquire(name string, leaseMS uint32) {
	c.t.Helper()
	c.send(acquireFrame(name, leaseMS))
}
func (c *conn) sendHeartbeat() { c.t.Helper(); c.send(heartbeat) }

// sendBytewise writes b one byte per write, pausing between writes so that
// each byte reaches the server as its own segment (TCP_NODELAY is on).
func (c *conn) sendBytewise(b []byte, pause time.Duration) {
	c.t.Helper()
	for i := range b {
		c.send(b[i : i+1])
		time.Sleep(pause)
	}
}

// frame is a decoded server frame with its reason copied out of the buffer.
type frame struct {
	Type   protocol.Type
	Token  uint64
	Code   protocol.Code
	Reason string
}

func (f frame) String() string {
	switch f.Type {
	case protocol.TypeWaiting:
		return "WAITING"
	case protocol.TypeAcquired:
		return fmt.Sprintf("ACQUIRED(%d)", f.Token)
	case protocol.TypeError:
		return fmt.Sprintf("ERROR(0x%02x %q)", uint8(f.Code), f.Reason)
	}
	return fmt.Sprintf("frame(0x%02x)", uint8(f.Type))
}

// readErr reads one server frame; the deadline is only a safety net.
func (c *conn) readErr(timeout time.Duration) (frame, error) {
	if err := c.nc.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return frame{}, err
	}
	var f protocol.Frame
	if err := protocol.ReadServerFrame(c.nc, &c.buf, &f); err != nil {
		return frame{}, err
	}
	return frame{Type: f.Type, Token: f.Token, Code: f.Code, Reason: string(f.Reason)}, nil
}

func (c *conn) readFrame() frame {
	c.t.Helper()
	f, err := c.readErr(safety)
	if err != nil {
		c.t.Fatalf("%s: reading a frame: %v", c.label, err)
	}
	return f
}

func (c *conn) expectWaiting() {
	c.t.Helper()
	if f := c.readFrame(); f.Type != protocol.TypeWaiting {
		c.t.Fatalf("%s: got %v, want WAITING", c.label, f)
	}
}

// expectAcquired reads an ACQUIRED and returns its token.
func (c *conn) expectAcquired() uint64 {
	c.t.Helper()
	f := c.readFrame()
	if f.Type != protocol.TypeAcquired {
		c.t.Fatalf("%s: got %v, want ACQUIRED", c.label, f)
	}
	return f.Token
}

// expectToken reads an ACQUIRED carrying exactly tok.
func (c *conn) expectToken(tok uint64) {
	c.t.Helper()
	if got := c.expectAcquired(); got != tok {
		c.t.Fatalf("%s: ACQUIRED(%d), want the session's token %d", c.label, got, tok)
	}
}

// expectError reads an ERROR with the given code and returns its reason. The
// reason must be valid UTF-8 and, when not empty, start with the code's
// canonical text (protocol.md: canonical text, optionally with detail).
func (c *conn) expectError(code protocol.Code) string {
	c.t.Helper()
	f := c.readFrame()
	if f.Type != protocol.TypeError || f.Code != code {
		c.t.Fatalf("%s: got %v, want ERROR 0x%02x (%v)", c.label, f, uint8(code), code)
	}
	if err := checkReason(f); err != nil {
		c.t.Fatalf("%s: %v", c.label, err)
	}
	return f.Reason
}

func checkReason(f frame) error {
	if !utf8.ValidString(f.Reason) {
		return fmt.Errorf("ERROR 0x%02x reason %q is not valid UTF-8", uint8(f.Code), f.Reason)
	}
	if f.Reason != "" && !strings.HasPrefix(f.Reason, f.Code.String()) {
		return fmt.Errorf("ERROR 0x%02x reason %q does not start with the canonical text %q", uint8(f.Code), f.Reason, f.Code.String())
	}
	return nil
}

// expectErrorThenEOF reads the ERROR and then the server's close.
func (c *conn) expectErrorThenEOF(code protocol.Code) string {
	c.t.Helper()
	reason := c.expectError(code)
	c.expectEOF()
	return reason
}

// expectEOF reads the server's close: no frame, then EOF.
func (c *conn) expectEOF() {
	c.t.Helper()
	if err := c.eofErr(); err != nil {
		c.t.Fatalf("%s: %v", c.label, err)
	}
}

func (c *conn) eofErr() error {
	f, err := c.readErr(safety)
	switch {
	case err == nil:
		return fmt.Errorf("got %v, want the connection closed (EOF)", f)
	case errors.Is(err, io.EOF):
		return nil
	default:
		return fmt.Errorf("want EOF, got %w", err)
	}
}

func (c *conn) close() {
	c.t.Helper()
	if err := c.nc.Close(); err != nil {
		c.t.Fatalf("%s: close: %v", c.label, err)
	}
}

// holder dials and takes a free lock, returning the connection and its token.
func holder(t testing.TB, ts *testServer, name string, leaseMS uint32) (*conn, uint64) {
	t.Helper()
	c := dial(t, ts, "holder of "+name)
	c.sendAcquire(name, leaseMS)
	return c, c.expectAcquired()
}

// waiter dials and queues on a held lock.
func waiter(t testing.TB, ts *testServer, label, name string, leaseMS uint32) *conn {
	t.Helper()
	c := dial(t, ts, label)
	c.sendAcquire(name, leaseMS)
	c.expectWaiting()
	return c
}

// queueWaiters dials n waiters on a held lock. Each reads its WAITING before
// the next connects, so the index is the arrival order.
func queueWaiters(t testing.TB, ts *testServer, name string, n int) []*conn {
	t.Helper()
	ws := make([]*conn, n)
	for i := range ws {
		ws[i] = waiter(t, ts, fmt.Sprintf("waiter %d", i), name, longLease)
	}
	return ws
}

// promoteInOrder closes the holder h, whose token is tok, then each new holder
// in turn, and checks that the waiters of ws that have not left are promoted
// in queue order, each with a larger token. It closes the last holder too.
func promoteInOrder(t testing.TB, h *conn, tok uint64, ws []*conn, left func(i int) bool) {
	t.Helper()
	cur := h
	for i, w := range ws {
		if left(i) {
			continue
		}
		cur.close()
		// Were anyone but w promoted, w would see nothing and the read would
		// time out.
		next := w.expectAcquired()
		if next <= tok {
			t.Fatalf("waiter %d: token %d after %d", i, next, tok)
		}
		tok, cur = next, w
	}
	cur.close()
}

// fdBudget returns how many client connections a test may open: each costs a
// descriptor on both ends, and the process keeps a margin for everything else.
func fdBudget(t testing.TB, want int) int {
	t.Helper()
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatalf("getrlimit: %v", err)
	}
	room := (int(rl.Cur) - 256) / 2
	if room < want {
		t.Logf("RLIMIT_NOFILE is %d: using %d connections instead of %d", rl.Cur, max(room, 0), want)
		return max(room, 0)
	}
	return want
}
