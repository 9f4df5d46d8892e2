package main

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/monolock/monolock/internal/certs/certstest"
	"github.com/monolock/monolock/protocol"
)

// binary is the monolock command built once for the process-level tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "monolock-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "monolock")
	out, err := exec.Command("go", "build", "-race", "-o", binary, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build monolock: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// process is a monolock server running as a child process.
type process struct {
	cmd     *exec.Cmd
	addr    string
	started map[string]any      // the start line
	logs    chan map[string]any // every JSON log line after the start line
	done    chan error
}

// startServer runs the binary on a free loopback port with JSON logs and
// waits for its start line, which names the address.
func startServer(t *testing.T, args ...string) *process {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"-listen", "127.0.0.1:0", "-log-format", "json"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, logs: make(chan map[string]any, 1024), done: make(chan error, 1)}
	started := make(chan map[string]any, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var line map[string]any
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
				t.Errorf("stderr line is not JSON: %q", sc.Text())
				continue
			}
			if line["message"] == "monolock started" {
				started <- line
				continue
			}
			select {
			case p.logs <- line:
			default:
			}
		}
		close(p.logs)
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
	})
	select {
	case p.started = <-started:
		p.addr = p.started["listen"].(string)
	case err := <-p.done:
		t.Fatalf("monolock exited before starting: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("monolock did not start")
	}
	return p
}

// waitLog returns the first log line whose message contains substr.
func (p *process) waitLog(t *testing.T, substr string) map[string]any {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case line, ok := <-p.logs:
			if !ok {
				t.Fatalf("server exited before logging %q", substr)
			}
			if msg, _ := line["message"].(string); strings.Contains(msg, substr) {
				return line
			}
		case <-timeout:
			t.Fatalf("no log line containing %q", substr)
		}
	}
}

// client is a raw protocol connection.
type client struct {
	conn net.Conn
	buf  protocol.FrameBuffer
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &client{conn: conn}
}

func (c *client) acquire(t *testing.T, name string) {
	t.Helper()
	if _, err := c.conn.Write(protocol.AppendAcquire(nil, 60_000, name)); err != nil {
		t.Fatal(err)
	}
}

// read returns the next frame; the deadline is only a safety net.
func (c *client) read(timeout time.Duration) (protocol.Frame, error) {
	var f protocol.Frame
	_ = c.conn.SetReadDeadline(time.Now().Add(timeout))
	err := protocol.ReadServerFrame(c.conn, &c.buf, &f)
	return f, err
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

// queuedClient connects, sends ACQUIRE for lock and reads the first answer
// in the background: a client beyond the server's descriptor limit waits in
// the kernel's backlog, and over TLS its handshake waits with it.
type queuedClient struct {
	conn   net.Conn
	answer chan error
	frame  protocol.Frame
}

func connectQueued(t *testing.T, addr string, cfg *tls.Config, lock string) *queuedClient {
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := &queuedClient{conn: raw, answer: make(chan error, 1)}
	if cfg != nil {
		c.conn = tls.Client(raw, cfg)
	}
	t.Cleanup(func() { _ = c.conn.Close() })
	go func() {
		if _, err := c.conn.Write(protocol.AppendAcquire(nil, 60_000, lock)); err != nil {
			c.answer <- err
			return
		}
		var buf protocol.FrameBuffer
		c.answer <- protocol.ReadServerFrame(c.conn, &buf, &c.frame)
	}()
	return c
}

// acquired waits up to timeout for ACQUIRED; false when no answer came.
func (c *queuedClient) acquired(t *testing.T, timeout time.Duration) bool {
	t.Helper()
	select {
	case err := <-c.answer:
		if err != nil || c.frame.Type != protocol.TypeAcquired {
			t.Fatalf("client got %+v, %v; want ACQUIRED", c.frame, err)
		}
		return true
	case <-time.After(timeout):
		return false
	}
}

func exhaustDescriptors(t *testing.T, p *process, cfg *tls.Config) {
	pid := p.cmd.Process.Pid
	const headroom = 16
	limit := uint64(openDescriptors(t, pid) + headroom)
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: limit, Max: limit}, nil); err != nil {
		t.Fatalf("lower the server's descriptor limit: %v", err)
	}

	// Twice as many clients as free descriptors, each on its own lock.
	clients := make([]*queuedClient, 2*headroom)
	for i := range clients {
		clients[i] = connectQueued(t, p.addr, cfg, fmt.Sprintf("lock-%d", i))
	}
	p.waitLog(t, "accepting a connection failed")

	// Some were served; the others wait in the kernel's accept queue.
	// A client with no answer by a shared deadline is queued.
	var served, queued []*queuedClient
	verdict := time.Now().Add(2 * time.Second)
	for _, c := range clients {
		if c.acquired(t, time.Until(verdict)) {
			served = append(served, c)
		} else {
			queued = append(queued, c)
		}
	}
	if len(served) == 0 || len(queued) == 0 {
		t.Fatalf("served %d, queued %d: the limit did not bite", len(served), len(queued))
	}
	t.Logf("limit %d: %d served, %d queued", limit, len(served), len(queued))

	// Free descriptors: every queued client is served, and so is a new one.
	for _, c := range served {
		_ = c.conn.Close()
	}
	for _, c := range queued {
		if !c.acquired(t, 30*time.Second) {
			t.Fatal("a queued client was not served after descriptors freed up")
		}
		_ = c.conn.Close()
	}
	if !connectQueued(t, p.addr, cfg, "fresh").acquired(t, 30*time.Second) {
		t.Fatal("a new client was not served")
	}
	if err := p.cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("server died: %v", err)
	}
}

// TestSIGTERM: every session gets ERROR 0x01, no waiter is promoted, exit 0.
func TestSIGTERM(t *testing.T) {
	p := startServer(t)
	holder := dial(t, p.addr)
	holder.acquire(t, "job")
	if f, err := holder.read(10 * time.Second); err != nil || f.Type != protocol.TypeAcquired {
		t.Fatalf("holder: %+v, %v", f, err)
	}
	waiters := make([]*client, 20)
	for i := range waiters {
		waiters[i] = dial(t, p.addr)
		waiters[i].acquire(t, "job")
		if f, err := waiters[i].read(10 * time.Second); err != nil || f.Type != protocol.TypeWaiting {
			t.Fatalf("waiter %d: %+v, %v", i, f, err)
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for i, c := range append([]*client{holder}, waiters...) {
		f, err := c.read(10 * time.Second)
		if err != nil || f.Type != protocol.TypeError || f.Code != protocol.CodeShuttingDown {
			t.Fatalf("session %d: got %+v, %v; want ERROR 0x01", i, f, err)
		}
		if _, err := c.read(10 * time.Second); !errors.Is(err, io.EOF) {
			t.Fatalf("session %d: want EOF after ERROR, got %v", i, err)
		}
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("exit: %v; want status 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("server did not exit after SIGTERM")
	}
}
