package eventloop_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/monolock/monolock/eventloop"
	"github.com/monolock/monolock/internal/certs"
	"github.com/monolock/monolock/internal/certs/certstest"
	"github.com/monolock/monolock/internal/testsupport/wire"
	"github.com/monolock/monolock/protocol"
	"github.com/monolock/monolock/protocol/admin"
)

// startTLSServer starts an in-process server that requires client
// certificates from pki's CA; maxHandshakes 0 keeps the default.
func startTLSServer(t testing.TB, ioTimeout time.Duration, maxHandshakes int) (*testServer, *certstest.PKI) {
	t.Helper()
	pki := certstest.NewPKI(t, t.TempDir())
	cfg, err := certs.Load(certs.Files{Cert: pki.Server.Cert, Key: pki.Server.Key, ClientCA: pki.CA})
	if err != nil {
		t.Fatal(err)
	}
	sc := eventloop.Config{
		ListenAddress: "127.0.0.1:0",
		IOTimeout:     ioTimeout,
		Logger:        zerolog.Nop(),
		TLS:           cfg,
		Identity:      certs.Identity,

		MaxTLSHandshakes: maxHandshakes,
	}
	return startServerConfig(t, sc), pki
}

// dialTLS opens a raw protocol connection over mutual TLS, bound to t.
func dialTLS(t testing.TB, ts *testServer, pki *certstest.PKI) *wire.Conn {
	t.Helper()
	return wire.MustDial(t, ts.Addr().String(), wire.Options{TLS: pki.ClientTLS(certstest.ClientURI), Label: "TLS client", Safety: safety})
}

// heldConn passes the client's first write (ClientHello) through and holds
// every later one until flush, so that the client's last handshake flight and
// its first records reach the server in one segment.
type heldConn struct {
	net.Conn
	mu     sync.Mutex
	writes int
	held   []byte
}

func (c *heldConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes++
	if c.writes == 1 {
		return c.Conn.Write(p)
	}
	c.held = append(c.held, p...)
	return len(p), nil
}

// take returns the held bytes without sending them.
func (c *heldConn) take() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.held
	c.held = nil
	return b
}

func (c *heldConn) flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.Conn.Write(c.held)
	c.held = nil
	return err
}

// dialHeld completes a TLS 1.3 client handshake whose last flight, and
// whatever the test sends next, the server receives only at held.flush. A
// TLS 1.3 client is done once it has sent Finished, so the server's
// handshake is still in flight until then.
func dialHeld(t *testing.T, ts *testServer, pki *certstest.PKI) (*wire.Conn, *heldConn) {
	t.Helper()
	tc, held := dialHeldAs(t, ts, pki, certstest.ClientURI)
	c := wire.New(tc, "TLS client").Bind(t)
	c.Safety = safety
	return c, held
}

// dialHeldAs is dialHeld for the client certificate name, with the bare
// tls.Conn; the test closes held.Conn.
func dialHeldAs(t *testing.T, ts *testServer, pki *certstest.PKI, name string) (*tls.Conn, *heldConn) {
	t.Helper()
	raw, err := net.DialTimeout("tcp", ts.Addr().String(), safety)
	if err != nil {
		t.Fatal(err)
	}
	held := &heldConn{Conn: raw}
	cfg := pki.ClientTLS(name)
	cfg.MinVersion = tls.VersionTLS13
	tc := tls.Client(held, cfg)
	_ = raw.SetDeadline(time.Now().Add(safety)) // a server that never answers fails the test
	if err := tc.Handshake(); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	_ = raw.SetDeadline(time.Time{})
	return tc, held
}

// An ACQUIRE that arrives together with the client's Finished is inside
// crypto/tls when the session joins the loop; it must still be answered.
// (Only TLS 1.3 allows it: a TLS 1.2 client waits for the server's Finished.)
func TestTLSAcquireInTheFinishedFlight(t *testing.T) {
	ts, pki := startTLSServer(t, 0, 0)
	c, held := dialHeld(t, ts, pki)
	c.Send(protocol.AppendAcquire(nil, longLease, "flight"))
	if err := held.flush(); err != nil {
		t.Fatal(err)
	}
	c.Expect(protocol.TypeAcquired)
}

// A client whose certificate is refused learns why: the server sends its
// alert and then closes in order, even though the client's last flight and
// a first request are still unread when the server gives up on it. Closing
// over unread input would reset the connection, and a client that writes
// next sees "connection reset by peer" instead of the alert.
func TestTLSRefusedClientGetsTheAlert(t *testing.T) {
	ts, pki := startTLSServer(t, 0, 0)
	// In TLS 1.3 the client is done before the server has judged its
	// certificate.
	tc, held := dialHeldAs(t, ts, pki, certstest.ClientUntrusted)
	raw := held.Conn
	defer raw.Close()
	if _, err := tc.Write(protocol.AppendAcquire(nil, longLease, "refused")); err != nil {
		t.Fatal(err)
	}
	if err := held.flush(); err != nil {
		t.Fatal(err)
	}
	// Below TLS: the alert record, then the end of the stream.
	_ = raw.SetReadDeadline(time.Now().Add(safety))
	got, err := io.ReadAll(raw)
	if err != nil || len(got) == 0 {
		t.Fatalf("after a refused certificate the client read %d bytes, then %v; want the alert, then EOF", len(got), err)
	}
}

// A refused client that neither reads nor closes keeps nobody waiting: with
// one compute slot, the next client is still served, long before the refused
// one's io-timeout.
func TestTLSRefusedClientThatStaysOpen(t *testing.T) {
	ts, pki := startTLSServer(t, time.Minute, 1)
	raw, err := net.DialTimeout("tcp", ts.Addr().String(), safety)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	cfg := pki.ClientTLS(certstest.ClientUntrusted)
	cfg.MinVersion = tls.VersionTLS13
	if err := tls.Client(raw, cfg).Handshake(); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	// The refused client now does nothing. The next one needs the slot too.
	c, _ := wire.Holder(t, ts.Addr().String(), wire.Options{TLS: pki.ClientTLS(certstest.ClientURI), Safety: safety}, "after-refusal", longLease)
	c.SendHeartbeat()
	c.Expect(protocol.TypeAcquired)
	// The server lingers only briefly for the refused one, not for its
	// io-timeout of a minute: only the holder's session is left.
	ts.waitStats(t, admin.Stats{Sessions: 1, Locks: 1, Timers: 1})
}

// The transport hands crypto/tls one record at a time and the loop stops
// asking for more once gnet holds none. Records that arrive together, and a
// record whose header arrives in pieces, must all be answered all the same.
func TestTLSRecordsArrivingTogetherOrInPieces(t *testing.T) {
	ts, pki := startTLSServer(t, 0, 0)
	c, held := dialHeld(t, ts, pki)
	c.Send(protocol.AppendAcquire(nil, longLease, "records"))
	if err := held.flush(); err != nil {
		t.Fatal(err)
	}
	c.Expect(protocol.TypeAcquired) // the session is in the loop
	// Three HEARTBEAT records leave in one write.
	for range 3 {
		c.SendHeartbeat()
	}
	if err := held.flush(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		c.Expect(protocol.TypeAcquired)
	}
	// One record a byte at a time: its header arrives in five pieces.
	c.SendHeartbeat()
	rec := held.take()
	if len(rec) < 6 {
		t.Fatalf("a heartbeat record of %d bytes", len(rec))
	}
	for i := range rec {
		if _, err := held.Conn.Write(rec[i : i+1]); err != nil {
			t.Fatal(err)
		}
	}
	c.Expect(protocol.TypeAcquired)
}

// Established TLS sessions cost no goroutine: the count does not grow with
// them.
func TestTLSSessionsHaveNoGoroutines(t *testing.T) {
	ts, pki := startTLSServer(t, 0, 0)
	_ = dialTLS(t, ts, pki).NC.Close() // every server goroutine is up
	settle := func() int {
		runtime.GC()
		return runtime.NumGoroutine()
	}
	before := settle()
	const n = 100
	clients := make([]*wire.Conn, n)
	for i := range clients {
		clients[i] = dialTLS(t, ts, pki)
		clients[i].Send(protocol.AppendAcquire(nil, longLease, "shared"))
		if i == 0 {
			clients[i].Expect(protocol.TypeAcquired)
		} else {
			clients[i].Expect(protocol.TypeWaiting)
		}
	}
	ts.waitStats(t, admin.Stats{Sessions: n, Locks: 1, Waiters: n - 1, Timers: n})
	// A handshake goroutine may still be returning after its enrollment;
	// wait for the count to settle instead of sampling once.
	deadline := time.Now().Add(safety)
	after := settle()
	for after > before+2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
		after = settle()
	}
	if after > before+2 {
		t.Fatalf("goroutines: %d before, %d with %d TLS sessions", before, after, n)
	}
	// Heartbeats and a handover still work.
	clients[1].Send(protocol.AppendHeartbeat(nil))
	clients[1].Expect(protocol.TypeWaiting)
	_ = clients[0].NC.Close()
	clients[1].Expect(protocol.TypeAcquired)
}

// A client that pipelines heartbeats and never reads its replies is closed
// after io-timeout; nothing of it stays behind in the server, and shutdown
// is prompt.
func TestTLSClientThatStopsReading(t *testing.T) {
	// io-timeout is 1 s, not less: each handshake must finish within it on a
	// loaded machine under the race detector.
	ts, pki := startTLSServer(t, time.Second, 0)
	beforeFDs := openFDs(t)
	_ = dialTLS(t, ts, pki).NC.Close() // every server goroutine is up
	ts.waitStats(t, admin.Stats{})     // and that session has left
	beforeG := runtime.NumGoroutine()

	const clients, beats = 8, 500_000
	flood := bytes.Repeat(protocol.AppendHeartbeat(nil), 4096)
	var wg sync.WaitGroup
	conns := make([]*wire.Conn, clients)
	// Every client has finished its handshake before any floods, so no
	// handshake competes with the floods for the machine.
	for i := range conns {
		conns[i] = dialTLS(t, ts, pki)
		conns[i].Send(protocol.AppendAcquire(nil, longLease, fmt.Sprintf("flood-%d", i)))
	}
	for _, c := range conns {
		wg.Go(func() {
			_ = c.NC.SetWriteDeadline(time.Now().Add(2 * safety))
			for sent := 0; sent < beats; sent += len(flood) {
				if _, err := c.NC.Write(flood); err != nil {
					return // the server closed us: expected
				}
			}
		})
	}
	wg.Wait()
	ts.waitStats(t, admin.Stats{})
	// The clients still hold their ends open; the server holds nothing.
	for _, c := range conns {
		_ = c.NC.SetReadDeadline(time.Now().Add(safety))
		if _, err := io.Copy(io.Discard, c.NC); err != nil && !isClosedByPeer(err) {
			t.Errorf("reading the end of a flooding session: %v", err)
		}
	}
	runtime.GC()
	if g := runtime.NumGoroutine(); g > beforeG+2 {
		t.Errorf("goroutines: %d before the flood, %d after", beforeG, g)
	}
	// The clients' own ends are still open; every server end is closed.
	if fds := openFDs(t); fds != beforeFDs+clients {
		t.Errorf("descriptors: %d before, %d with %d client ends still open; want %d", beforeFDs, fds, clients, beforeFDs+clients)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ts.shutdown(t, ctx)
}

func isClosedByPeer(err error) bool {
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ne) || strings.Contains(err.Error(), "reset")
}

// A client that connects and never completes its handshake is closed after
// io-timeout, whether it sent nothing, part of its ClientHello, or all of it
// and then nothing, and its handshake goroutine ends.
func TestTLSHandshakeThatNeverCompletes(t *testing.T) {
	ts, pki := startTLSServer(t, 200*time.Millisecond, 0)
	_ = dialTLS(t, ts, pki).NC.Close() // every server goroutine is up
	before := runtime.NumGoroutine()
	silent := make([]net.Conn, 20)
	for i := range silent {
		c, err := net.DialTimeout("tcp", ts.Addr().String(), safety)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		silent[i] = c
		if i%2 == 1 { // a handshake record declaring 512 bytes, 6 of them sent
			if _, err := c.Write([]byte{22, 3, 1, 2, 0, 1, 0, 1, 252, 3, 3}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range 5 { // a whole ClientHello, then nothing
		_, held := dialHeldAs(t, ts, pki, certstest.ClientURI)
		t.Cleanup(func() { _ = held.Conn.Close() })
		silent = append(silent, held.Conn)
	}
	for _, c := range silent {
		_ = c.SetReadDeadline(time.Now().Add(safety))
		if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("silent TLS client: read %v, want the server to close it", err)
		}
	}
	deadline := time.Now().Add(safety)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("goroutines: %d before, %d after the handshakes timed out\n%s", before, g, buf[:runtime.Stack(buf, true)])
	}
}

// Stalled handshakes hold no slot that others wait for: silent connects,
// ClientHellos cut short, and clients that stop after their ClientHello
// (whose handshake goroutine waits for them), many more than the compute
// slots, and a well-behaved client is served at once, long before their
// io-timeout. Only the ones past their ClientHello have a goroutine.
func TestTLSStalledHandshakesHoldNoSlot(t *testing.T) {
	ts, pki := startTLSServer(t, time.Hour, 2)
	_ = dialTLS(t, ts, pki).NC.Close() // every server goroutine is up
	ts.waitStatsFunc(t, "no sessions", func(st admin.Stats) bool { return st.Sessions == 0 })
	before := runtime.NumGoroutine()
	const silent, partial, stalled = 64, 64, 8
	for i := range silent + partial {
		c, err := net.DialTimeout("tcp", ts.Addr().String(), safety)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		if i >= silent { // a handshake record declaring 512 bytes, 6 of them sent
			if _, err := c.Write([]byte{22, 3, 1, 2, 0, 1, 0, 1, 252, 3, 3}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range stalled { // the client's last flight never leaves
		_, held := dialHeldAs(t, ts, pki, certstest.ClientURI)
		t.Cleanup(func() { _ = held.Conn.Close() })
	}
	ts.waitStatsFunc(t, "every stalled connection open", func(st admin.Stats) bool {
		return st.Sessions == silent+partial+stalled
	})
	if g := runtime.NumGoroutine() - before; g > stalled+2 {
		t.Errorf("%d goroutines for %d silent, %d partial and %d stalled handshakes; want at most one per stalled one", g, silent, partial, stalled)
	}
	c, _ := wire.Holder(t, ts.Addr().String(), wire.Options{TLS: pki.ClientTLS(certstest.ClientURI), Safety: safety}, "beside-the-stalled", longLease)
	c.SendHeartbeat()
	c.Expect(protocol.TypeAcquired)
}

// A TLS 1.3 KeyUpdate from the client, asking the server to update too, is
// handled inside the loop: the session goes on. OpenSSL's s_client sends one
// on the command "K".
func TestTLSKeyUpdateFromClient(t *testing.T) {
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("openssl is not installed; it is what sends the KeyUpdate")
	}
	ts, pki := startTLSServer(t, 0, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 2*safety)
	defer cancel()
	cmd := exec.CommandContext(ctx, openssl, "s_client", "-connect", ts.Addr().String(), "-tls1_3",
		"-cert", pki.Clients[certstest.ClientURI].Cert, "-key", pki.Clients[certstest.ClientURI].Key,
		"-CAfile", pki.CA, "-quiet", "-no_ign_eof")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	said := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			said <- sc.Text()
		}
		close(said)
	}()
	out := bufio.NewReader(stdout)
	var fb protocol.FrameBuffer
	var f protocol.Frame
	expect := func(what string) {
		t.Helper()
		if err := protocol.ReadServerFrame(out, &fb, &f); err != nil || f.Type != protocol.TypeAcquired {
			t.Fatalf("%s: got %+v, %v; want ACQUIRED", what, f, err)
		}
	}
	_, _ = stdin.Write(protocol.AppendAcquire(nil, longLease, "keyupdate"))
	expect("ACQUIRE")
	tok := f.Token
	_, _ = stdin.Write([]byte("K\n")) // KeyUpdate, update_requested
	for line := range said {          // s_client reads commands and data alike: wait
		if strings.Contains(line, "KEYUPDATE") {
			break
		}
	}
	_, _ = stdin.Write(protocol.AppendHeartbeat(nil))
	expect("HEARTBEAT after KeyUpdate")
	if f.Token != tok {
		t.Fatalf("token changed from %d to %d", tok, f.Token)
	}
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries) - 1 // the directory being read
}

// A handshake that finishes while the server shuts down still gets ERROR
// 0x01, like every session, and no grant.
func TestTLSHandshakeFinishingDuringShutdown(t *testing.T) {
	ts, pki := startTLSServer(t, 0, 0)
	// The client's Finished, with an ACQUIRE behind it, is held back: the
	// server's handshake is in flight.
	c, held := dialHeld(t, ts, pki)
	c.Send(protocol.AppendAcquire(nil, longLease, "during-shutdown"))
	shutdown := make(chan error, 1)
	go func() { shutdown <- ts.Shutdown(context.Background()) }()
	for { // shutdown has begun once the listener refuses
		probe, err := net.DialTimeout("tcp", ts.Addr().String(), safety)
		if err != nil {
			break
		}
		_ = probe.Close()
		runtime.Gosched()
	}
	if err := held.flush(); err != nil {
		t.Fatal(err)
	}
	c.ExpectCodeThenEOF(protocol.CodeShuttingDown)
	if err := <-shutdown; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// recordingConn keeps every byte read from the network.
type recordingConn struct {
	net.Conn
	mu   sync.Mutex
	read []byte
}

func (c *recordingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.read = append(c.read, p[:n]...)
	c.mu.Unlock()
	return n, err
}

// The server ends a TLS session with close_notify, so that the client can
// tell a deliberate close from a cut connection. Over TLS 1.2 the alert's
// record type is visible on the wire: the last record is an alert (21).
func TestTLSCloseNotify(t *testing.T) {
	ts, pki := startTLSServer(t, 0, 0)
	raw, err := net.DialTimeout("tcp", ts.Addr().String(), safety)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingConn{Conn: raw}
	cfg := pki.ClientTLS(certstest.ClientURI)
	cfg.MaxVersion = tls.VersionTLS12
	c := wire.New(tls.Client(rec, cfg), "TLS 1.2 client").Bind(t)
	c.Safety = safety
	c.Send(protocol.AppendAcquire(nil, longLease, "close-notify"))
	c.Expect(protocol.TypeAcquired)
	c.Send([]byte{0x7f}) // a protocol error: the server closes the session
	c.ExpectCodeThenEOF(protocol.CodeUnknownMessageType)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var last byte
	for b := rec.read; len(b) >= 5; {
		n := 5 + (int(b[3])<<8 | int(b[4]))
		if n > len(b) {
			t.Fatalf("a cut record in what the server sent")
		}
		last, b = b[0], b[n:]
	}
	if last != 21 {
		t.Fatalf("the last record the server sent has type %d, want an alert (21): no close_notify", last)
	}
}

// KeyUpdates, each a key derivation for the server, are allowed in a small
// burst and then at a low rate: a client that sends them faster than any
// client needs is closed.
func TestTLSKeyUpdateFlood(t *testing.T) {
	ts, pki := startTLSServer(t, 0, 0)
	r := dialRaw(t, ts, pki)
	for range 8 { // the burst: well within the rate
		r.send(t, r.keyUpdate(t))
	}
	r.send(t, r.appData(protocol.AppendAcquire(nil, longLease, "updated")))
	ts.waitStats(t, admin.Stats{Sessions: 1, Locks: 1, Timers: 1})
	r.send(t, r.keyUpdate(t)) // one more at once is over the rate
	ts.waitStats(t, admin.Stats{})
}

// A record left half-sent is a half-sent frame: the session is closed after
// io-timeout, though its lease would let it stay.
func TestTLSHalfSentRecord(t *testing.T) {
	ts, pki := startTLSServer(t, 300*time.Millisecond, 0)
	r := dialRaw(t, ts, pki)
	r.send(t, r.appData(protocol.AppendAcquire(nil, longLease, "half-record")))
	ts.waitStats(t, admin.Stats{Sessions: 1, Locks: 1, Timers: 1})
	hb := r.appData(protocol.AppendHeartbeat(nil))
	r.send(t, hb[:10])
	ts.waitStats(t, admin.Stats{})
}

// A handshake message the client begins after the handshake and never
// finishes (it may declare 64 KiB) is a half-sent frame too, and the server
// holds at most maxControlBytes of it: more closes the session at once.
func TestTLSHalfSentHandshakeMessage(t *testing.T) {
	start := func(t *testing.T, ioTimeout time.Duration) (*testServer, *rawTLS) {
		ts, pki := startTLSServer(t, ioTimeout, 0)
		r := dialRaw(t, ts, pki)
		r.send(t, r.appData(protocol.AppendAcquire(nil, longLease, "half-message")))
		ts.waitStats(t, admin.Stats{Sessions: 1, Locks: 1, Timers: 1})
		return ts, r
	}
	part := make([]byte, 1000)
	t.Run("timeout", func(t *testing.T) {
		ts, r := start(t, 300*time.Millisecond)
		r.send(t, r.handshake(append([]byte{24, 0, 0xff, 0xff}, part...)))
		ts.waitStats(t, admin.Stats{})
	})
	t.Run("bound", func(t *testing.T) { // no io-timeout within the test
		ts, r := start(t, time.Hour)
		r.send(t, r.handshake(append([]byte{24, 0, 0xff, 0xff}, part...)))
		for range 4 {
			r.send(t, r.handshake(part))
		}
		ts.waitStats(t, admin.Stats{})
	})
}
