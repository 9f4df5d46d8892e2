package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/monolock/monolock/internal/certs/certstest"
	"github.com/monolock/monolock/internal/testsupport/proc"
	"github.com/monolock/monolock/internal/testsupport/wire"
	"github.com/monolock/monolock/protocol"
)

// binary is the monolock command built once (with -race) for the
// process-level tests.
var binary string

func TestMain(m *testing.M) {
	var err error
	if binary, err = proc.Binary("./cmd/monolock", "-race"); err != nil {
		fmt.Fprintf(os.Stderr, "build monolock: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	proc.Cleanup()
	os.Exit(code)
}

// testLease is a lease no test outlives, in milliseconds.
const testLease = 60_000

// startServer runs the binary on a free loopback port with JSON logs and
// returns once it is ready (proc's readiness contract: the start line, and
// /readyz with an ops port).
func startServer(t *testing.T, args ...string) *proc.Process {
	t.Helper()
	return proc.MonolockT(t, binary, args...)
}

func openDescriptors(t *testing.T, pid int) int {
	t.Helper()
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// TestDescriptorExhaustion runs the server under a low RLIMIT_NOFILE with
// more clients than descriptors, plain and over mutual TLS: it keeps
// running, says so in its log, and serves the queued clients once
// descriptors free up.
func TestDescriptorExhaustion(t *testing.T) {
	t.Run("plain", func(t *testing.T) {
		p := startServer(t)
		exhaustDescriptors(t, p, nil)
	})
	t.Run("mTLS", func(t *testing.T) {
		_, pki, _ := labFiles(t)
		p := startServer(t, "-tls-cert", pki.Server.Cert, "-tls-key", pki.Server.Key, "-tls-client-ca", pki.CA)
		exhaustDescriptors(t, p, pki.ClientTLS(certstest.ClientURI))
	})
}

// TestDescriptorExhaustionBySilentClients fills the server's descriptors
// with connections that never send anything, under an io-timeout that would
// keep them for an hour: a holder keeps its lock, a new client is served
// all the same (the server closes the connection that has waited longest
// for its ACQUIRE), and /readyz answers at the limit.
func TestDescriptorExhaustionBySilentClients(t *testing.T) {
	t.Run("plain", func(t *testing.T) {
		p := startServer(t, "-io-timeout", "1h", "-ops-listen", "127.0.0.1:0")
		evictSilent(t, p, wire.Options{})
	})
	t.Run("mTLS", func(t *testing.T) {
		_, pki, _ := labFiles(t)
		p := startServer(t, "-io-timeout", "1h", "-ops-listen", "127.0.0.1:0",
			"-tls-cert", pki.Server.Cert, "-tls-key", pki.Server.Key, "-tls-client-ca", pki.CA)
		evictSilent(t, p, wire.Options{TLS: pki.ClientTLS(certstest.ClientURI)})
	})
}

func evictSilent(t *testing.T, p *proc.Process, o wire.Options) {
	holder, token := wire.Holder(t, p.Addr, o, "held", testLease)
	const headroom = 16
	limitDescriptors(t, p, headroom)
	// More silent connections than descriptors: those past the limit wait
	// in the backlog, and the server evicts older ones to take them.
	for range 3 * headroom {
		c, err := net.Dial("tcp", p.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
	}
	p.MustWaitLog(t, "descriptor limit reached")

	if !connectQueued(t, p.Addr, o.TLS, "fresh").acquired(t, 30*time.Second) {
		t.Fatal("a new client was not served while silent connections held every descriptor")
	}
	holder.SendHeartbeat()
	holder.ExpectToken(token)

	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Get("http://" + p.OpsAddr + "/readyz")
	if err != nil {
		t.Fatalf("/readyz at the descriptor limit: %v", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/readyz at the descriptor limit: %s, want 200", resp.Status)
	}
}

// TestDescriptorExhaustionBySilentWaiters fills the server's descriptors
// with waiters that never heartbeat, under a lease that would keep them for
// a minute: the server closes those silent for -waiter-silence-limit to
// take the connections behind them, so a new client is served and a
// holder keeps its lock. Without the rule nothing
// is evictable and the new client waits in the backlog for good.
func TestDescriptorExhaustionBySilentWaiters(t *testing.T) {
	t.Run("plain", func(t *testing.T) {
		p := startServer(t, "-waiter-silence-limit", "1s", "-ops-listen", "127.0.0.1:0")
		evictSilentWaiters(t, p, wire.Options{})
	})
	t.Run("mTLS", func(t *testing.T) {
		_, pki, _ := labFiles(t)
		p := startServer(t, "-waiter-silence-limit", "1s", "-ops-listen", "127.0.0.1:0",
			"-tls-cert", pki.Server.Cert, "-tls-key", pki.Server.Key, "-tls-client-ca", pki.CA)
		evictSilentWaiters(t, p, wire.Options{TLS: pki.ClientTLS(certstest.ClientURI)})
	})
}

func evictSilentWaiters(t *testing.T, p *proc.Process, o wire.Options) {
	holder, token := wire.Holder(t, p.Addr, o, "held", testLease)
	const headroom = 16
	limitDescriptors(t, p, headroom)
	// More waiters than descriptors, none of which will ever heartbeat:
	// those past the limit wait in the backlog, their ACQUIRE sent.
	for range 3 * headroom {
		connectQueued(t, p.Addr, o.TLS, "held")
	}
	p.MustWaitLog(t, "descriptor limit reached")

	if !connectQueued(t, p.Addr, o.TLS, "fresh").acquired(t, 30*time.Second) {
		t.Fatal("a new client was not served while waiters without heartbeats held every descriptor")
	}
	holder.SendHeartbeat()
	holder.ExpectToken(token)
	if n := value(t, scrape(t, p.OpsAddr), "monolock_silent_waiters_evicted_total"); n == 0 {
		t.Fatal("monolock_silent_waiters_evicted_total is 0 after silent waiters were evicted")
	}
}

// TestDescriptorExhaustionByOneSource fills the server's descriptors with
// waiters from one address (127.0.0.2) that are far younger than
// -waiter-silence-limit and never heartbeat, with more of them queued
// behind: a client from another address (127.0.0.1) is served all the same,
// from the first second, because the source with the most sessions that
// are not holders gives up its newest, while the holder keeps its lock.
// Without the per-source rule none of the waiters is evictable for a
// minute, and the client waits in the backlog behind the others.
func TestDescriptorExhaustionByOneSource(t *testing.T) {
	t.Run("plain", func(t *testing.T) {
		p := startServer(t, "-ops-listen", "127.0.0.1:0")
		crowdOut(t, p, wire.Options{})
	})
	t.Run("mTLS", func(t *testing.T) {
		_, pki, _ := labFiles(t)
		p := startServer(t, "-ops-listen", "127.0.0.1:0",
			"-tls-cert", pki.Server.Cert, "-tls-key", pki.Server.Key, "-tls-client-ca", pki.CA)
		crowdOut(t, p, wire.Options{TLS: pki.ClientTLS(certstest.ClientURI)})
	})
}

// crowdSource is the one address the crowd in crowdOut comes from.
const crowdSource = "127.0.0.2"

func crowdOut(t *testing.T, p *proc.Process, o wire.Options) {
	holder, token := wire.Holder(t, p.Addr, o, "held", testLease)
	const headroom = 16
	limitDescriptors(t, p, headroom)
	crowd := make([]*queuedClient, 3*headroom)
	for i := range crowd {
		crowd[i] = connectQueuedFrom(t, crowdSource, p.Addr, o.TLS, "held")
	}
	waitForLimit(t, p)

	if !connectQueued(t, p.Addr, o.TLS, "fresh").acquired(t, 30*time.Second) {
		t.Fatal("a client from another address was not served while one address held every descriptor with young waiters")
	}
	holder.SendHeartbeat()
	holder.ExpectToken(token)
	if n := value(t, scrape(t, p.OpsAddr), "monolock_share_evictions_total"); n == 0 {
		t.Fatal("monolock_share_evictions_total is 0 after the crowd gave up a session for another address")
	}
	if n := value(t, scrape(t, p.OpsAddr), "monolock_silent_waiters_evicted_total"); n != 0 {
		t.Fatalf("monolock_silent_waiters_evicted_total is %v: no waiter was silent for -waiter-silence-limit", n)
	}
}

// queuedClient connects, sends ACQUIRE for lock and reads the first answer
// in the background: a client beyond the server's descriptor limit waits in
// the kernel's backlog, and over TLS its handshake waits with it.
type queuedClient struct {
	*wire.Conn
	answered chan struct{} // closed once frame and err hold the first answer
	frame    wire.Frame
	err      error
}

func connectQueued(t *testing.T, addr string, cfg *tls.Config, lock string) *queuedClient {
	return connectQueuedFrom(t, "", addr, cfg, lock)
}

// connectQueuedFrom is connectQueued from local address from ("" for the
// system's choice).
func connectQueuedFrom(t *testing.T, from, addr string, cfg *tls.Config, lock string) *queuedClient {
	d, err := wire.Options{From: from}.Dialer(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	nc := raw
	if cfg != nil {
		nc = tls.Client(raw, cfg) // the handshake waits in the backlog too
	}
	// A queued client waits as long as acquired is told to; the deadlines
	// are only a net behind that.
	c := &queuedClient{Conn: wire.New(nc, lock), answered: make(chan struct{})}
	c.Safety = time.Minute
	t.Cleanup(func() { _ = c.NC.Close() })
	go func() {
		c.frame, c.err = c.RequestErr(wire.Acquire(lock, testLease))
		close(c.answered)
	}()
	return c
}

// answeredWithin waits up to timeout for the first answer.
func (c *queuedClient) answeredWithin(timeout time.Duration) bool {
	select {
	case <-c.answered:
		return true
	default:
	}
	select {
	case <-c.answered:
		return true
	case <-time.After(timeout):
		return false
	}
}

// closedUnanswered reports, once the client has its answer, whether that
// was the server's close before any frame.
func (c *queuedClient) closedUnanswered() bool {
	return c.frame.Type == 0 && (errors.Is(c.err, io.EOF) || errors.Is(c.err, io.ErrUnexpectedEOF) ||
		errors.Is(c.err, syscall.EPIPE) || errors.Is(c.err, syscall.ECONNRESET))
}

// acquired waits up to timeout for ACQUIRED; false when no answer came.
func (c *queuedClient) acquired(t *testing.T, timeout time.Duration) bool {
	t.Helper()
	if !c.answeredWithin(timeout) {
		return false
	}
	if c.err != nil || c.frame.Type != protocol.TypeAcquired {
		t.Fatalf("client got %+v, %v; want ACQUIRED", c.frame, c.err)
	}
	return true
}

func exhaustDescriptors(t *testing.T, p *proc.Process, cfg *tls.Config) {
	const headroom = 16
	limit := limitDescriptors(t, p, headroom)

	// Twice as many clients as free descriptors, each on its own lock.
	clients := make([]*queuedClient, 2*headroom)
	for i := range clients {
		clients[i] = connectQueued(t, p.Addr, cfg, fmt.Sprintf("lock-%d", i))
	}
	evictionLogged := waitForLimit(t, p)

	// Some were served; the others wait in the kernel's accept queue.
	// A client with no answer by a shared deadline is queued. The deadline
	// runs from the first answer, not from the dials: on a loaded machine
	// the server may take longer than that to finish its first handshakes.
	// (A slow served client taken for a queued one is harmless: below, each
	// queued client is waited for.)
	//
	// A client the server accepted but that had not sent its ACQUIRE
	// within the eviction grace (a TLS handshake on a loaded machine) may
	// have been closed to accept a queued one: the eviction rule of
	// TestDescriptorExhaustionBySilentClients. That is the server's choice,
	// which its log must show; such a client dials again once descriptors
	// free up, and is served then.
	first := make(chan struct{}, len(clients))
	for _, c := range clients {
		go func() { <-c.answered; first <- struct{}{} }()
	}
	select {
	case <-first:
	case <-time.After(30 * time.Second):
		t.Fatal("no client had an answer at the descriptor limit")
	}
	var served, queued, evicted []*queuedClient
	verdict := time.Now().Add(2 * time.Second)
	for _, c := range clients {
		switch {
		case !c.answeredWithin(time.Until(verdict)):
			queued = append(queued, c)
		case c.closedUnanswered():
			evicted = append(evicted, c)
		case c.acquired(t, 0):
			served = append(served, c)
		}
	}
	if len(served) == 0 || len(queued) == 0 {
		t.Fatalf("served %d, queued %d: the limit did not bite", len(served), len(queued))
	}
	t.Logf("limit %d: %d served, %d queued, %d evicted before their ACQUIRE", limit, len(served), len(queued), len(evicted))

	// Free descriptors: every queued client is served, and so is a new one.
	for _, c := range served {
		_ = c.NC.Close()
	}
	for _, c := range queued {
		if !c.answeredWithin(30 * time.Second) {
			t.Fatal("a queued client was not served after descriptors freed up")
		}
		if c.closedUnanswered() { // evicted on its way in, before the closes above had freed descriptors
			evicted = append(evicted, c)
			continue
		}
		c.acquired(t, 0)
		_ = c.NC.Close()
	}
	if len(evicted) > 0 && !evictionLogged {
		if _, err := p.WaitLog(evictionLine, 30*time.Second); err != nil {
			t.Fatalf("%d clients were closed before any answer (first: %v), and the server logged no eviction: it dropped accepted connections at the descriptor limit (%v)",
				len(evicted), evicted[0].err, err)
		}
	}
	for _, c := range evicted {
		again := connectQueued(t, p.Addr, cfg, c.Label)
		if !again.acquired(t, 30*time.Second) {
			t.Fatal("an evicted client that dialled again was not served after descriptors freed up")
		}
		_ = again.NC.Close()
	}
	if !connectQueued(t, p.Addr, cfg, "fresh").acquired(t, 30*time.Second) {
		t.Fatal("a new client was not served")
	}
	if err := p.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("server died: %v", err)
	}
}

// evictionLine is what the server logs when it closes connections at the
// descriptor limit: the first time, then at most once per 5 s.
const evictionLine = "descriptor limit reached: closed connections that had not sent ACQUIRE"

// waitForLimit waits until the server logs a failed accept, and reports
// whether it logged an eviction on the way: the first accept that fails
// may find a connection to close (a handshake that has said nothing for
// the eviction grace on a loaded machine), and then the eviction's line
// comes first. WaitLog consumes the lines it passes, and the next eviction
// line may be 5 s away, so it must be noticed here.
func waitForLimit(t *testing.T, p *proc.Process) (evictionLogged bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case line, ok := <-p.Logs():
			if !ok {
				t.Fatal("the server exited before its descriptor limit was reached")
			}
			msg, _ := line["message"].(string)
			evictionLogged = evictionLogged || strings.Contains(msg, evictionLine)
			if strings.Contains(msg, "accepting a connection failed") {
				return evictionLogged
			}
		case <-deadline:
			t.Fatal("the server logged no failed accept within 30s")
		}
	}
}

// TestSIGTERM: every session gets ERROR 0x01, no waiter is promoted, exit 0.
func TestSIGTERM(t *testing.T) {
	p := startServer(t)
	holder := wire.MustDial(t, p.Addr, wire.Options{})
	holder.SendAcquire("job", testLease)
	if f, err := holder.ReadErr(10 * time.Second); err != nil || f.Type != protocol.TypeAcquired {
		t.Fatalf("holder: %+v, %v", f, err)
	}
	waiters := make([]*wire.Conn, 20)
	for i := range waiters {
		waiters[i] = wire.MustDial(t, p.Addr, wire.Options{})
		waiters[i].SendAcquire("job", testLease)
		if f, err := waiters[i].ReadErr(10 * time.Second); err != nil || f.Type != protocol.TypeWaiting {
			t.Fatalf("waiter %d: %+v, %v", i, f, err)
		}
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for i, c := range append([]*wire.Conn{holder}, waiters...) {
		f, err := c.ReadErr(10 * time.Second)
		if err != nil || f.Type != protocol.TypeError || f.Code != protocol.CodeShuttingDown {
			t.Fatalf("session %d: got %+v, %v; want ERROR 0x01", i, f, err)
		}
		if _, err := c.ReadErr(10 * time.Second); !errors.Is(err, io.EOF) {
			t.Fatalf("session %d: want EOF after ERROR, got %v", i, err)
		}
	}
	select {
	case <-p.Done():
		err := p.Err()
		if err != nil {
			t.Fatalf("exit: %v; want status 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("server did not exit after SIGTERM")
	}
}

// limitDescriptors lowers the running server's descriptor limit to what it
// has open now plus free, and returns the new limit.
func limitDescriptors(t *testing.T, p *proc.Process, free int) int {
	t.Helper()
	pid := p.Pid()
	limit := openDescriptors(t, pid) + free
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: uint64(limit), Max: uint64(limit)}, nil); err != nil {
		t.Fatalf("lower the server's descriptor limit: %v", err)
	}
	return limit
}
