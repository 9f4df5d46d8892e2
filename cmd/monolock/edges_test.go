package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/monolock/monolock/internal/opshttp"
	"github.com/monolock/monolock/internal/testsupport/keepalive"
	"github.com/monolock/monolock/internal/testsupport/wire"
	"github.com/monolock/monolock/protocol"
)

// safety bounds a wait for an event that should come promptly; it only keeps
// a broken build from hanging the run.
const safety = 10 * time.Second

// openFDs maps this process's descriptors to what they refer to.
func openFDs(t *testing.T) map[string]string {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	fds := map[string]string{}
	for _, e := range entries {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil {
			fds[e.Name()] = target
		}
	}
	return fds
}

// TestStartFailuresCloseEverything: a setting the server cannot start with
// ends it with one line naming the setting, its value and the cause, exit
// status 1, and nothing left open: the event loop, the listeners opened
// before the failing one, the audit log.
func TestStartFailuresCloseEverything(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	taken := busy.Addr().String()
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	inUse := ": address already in use: another process (or another monolock listener) holds this port; stop it or choose another port"
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want string // the whole line, or its start
	}{
		{"-listen in use", []string{"-listen", taken, "-audit-log", audit}, nil,
			"monolock: -listen " + taken + inUse},
		{"-listen from the environment", nil, map[string]string{"MONOLOCK_LISTEN_ADDRESS": taken, "MONOLOCK_AUDIT_LOG": audit},
			"monolock: MONOLOCK_LISTEN_ADDRESS=" + taken + inUse},
		{"-listen unassignable", []string{"-listen", "192.0.2.1:7070", "-audit-log", audit}, nil,
			"monolock: -listen 192.0.2.1:7070: cannot assign requested address: no network interface of this host has this IP address"},
		{"-ops-listen in use", []string{"-listen", "127.0.0.1:0", "-ops-listen", taken, "-audit-log", audit}, nil,
			"monolock: -ops-listen " + taken + inUse},
		{"-ops-listen unparsable", []string{"-listen", "127.0.0.1:0", "-ops-listen", "localhost", "-audit-log", audit}, nil,
			"monolock: -ops-listen localhost: missing port in address; want host:port with a port from 0 to 65535, such as 127.0.0.1:9090"},
		{"-admin-listen in use", []string{"-listen", "127.0.0.1:0", "-ops-listen", "127.0.0.1:0", "-admin-listen", taken, "-audit-log", audit}, nil,
			"monolock: -admin-listen " + taken + inUse},
		{"-admin-listen bad port", []string{"-listen", "127.0.0.1:0", "-ops-listen", "127.0.0.1:0", "-admin-listen", "127.0.0.1:70000", "-audit-log", audit}, nil,
			"monolock: -admin-listen 127.0.0.1:70000: invalid port; want host:port"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := openFDs(t)
			var stderr bytes.Buffer
			status := run(c.args, env(c.env), &stderr, signals{})
			lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
			if status != 1 || len(lines) != 1 || !strings.HasPrefix(lines[0], c.want) {
				t.Errorf("status %d, stderr:\n%s\nwant status 1 and one line starting %q", status, stderr.String(), c.want)
			}
			for fd, target := range openFDs(t) {
				if before[fd] != target {
					t.Errorf("descriptor %s (%s) left open", fd, target)
				}
			}
		})
	}
}

// TestStartFailureExitStatus is the process's view: exit status 1 and one
// line on stderr, not a Go panic.
func TestStartFailureExitStatus(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cmd := exec.Command(binary, "-listen", "127.0.0.1:0", "-ops-listen", busy.Addr().String(), "-audit-log", filepath.Join(t.TempDir(), "a.jsonl"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit: %v, want status 1; stderr:\n%s", err, stderr.String())
	}
	want := "monolock: -ops-listen " + busy.Addr().String() + ": address already in use"
	if lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], want) {
		t.Fatalf("stderr:\n%s\nwant one line starting %q", stderr.String(), want)
	}
}

// TestAuditLogOnFullDisk: a full disk under the audit log costs the audit
// stream, not the lock service, and says so everywhere an operator looks.
func TestAuditLogOnFullDisk(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	p := startServer(t, "-ops-listen", "127.0.0.1:0", "-audit-log", "/dev/full")
	ops := "http://" + p.OpsAddr
	holder := wire.MustDial(t, p.Addr, wire.Options{})
	holder.SendAcquire("job", testLease)
	if f, err := holder.ReadErr(safety); err != nil || f.Type != protocol.TypeAcquired {
		t.Fatalf("lock traffic: %+v, %v; want ACQUIRED", f, err)
	}

	line := p.MustWaitLog(t, "audit log failing")
	if line["level"] != "error" || line["audit_log"] != "/dev/full" || !strings.Contains(fmt.Sprint(line["error"]), "no space left on device") {
		t.Errorf("log line %v, want an error naming /dev/full and the cause", line)
	}
	if n := value(t, scrape(t, p.OpsAddr), "monolock_audit_write_errors_total"); n <= 0 {
		t.Errorf("monolock_audit_write_errors_total = %v, want > 0", n)
	}
	if code, body := get(t, ops+"/readyz"); code != 503 || !strings.Contains(body, "audit log writes failing: write /dev/full: no space left on device") {
		t.Errorf("/readyz: %d %q, want 503 naming the audit failure", code, body)
	}
	if code, body := get(t, ops+"/healthz"); code != 200 {
		t.Errorf("/healthz: %d %q, want 200: the event loop lives", code, body)
	}
	next := wire.MustDial(t, p.Addr, wire.Options{})
	next.SendAcquire("job", testLease)
	if f, err := next.ReadErr(safety); err != nil || f.Type != protocol.TypeWaiting {
		t.Fatalf("second client: %+v, %v; want WAITING", f, err)
	}

	// Shutdown cannot flush the audit log, and says so.
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if line := p.MustWaitLog(t, "closing the audit log"); !strings.Contains(fmt.Sprint(line["error"]), "bytes of events not written") {
		t.Errorf("shutdown line %v", line)
	}
	select {
	case <-p.Done():
		err := p.Err()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Errorf("exit: %v, want status 1 for the lost events", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("server did not exit after SIGTERM")
	}
}

// syncBuffer collects log output written from several goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startInProcess runs the daemon in the test process, with JSON logs into
// logs and the given HTTP limits (zero: the defaults).
func startInProcess(t *testing.T, lim opshttp.Limits, logs io.Writer, args ...string) *daemon {
	t.Helper()
	cfg, err := parseSettings(append([]string{"-listen", "127.0.0.1:0"}, args...), env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg.httpLimits = lim
	log := zerolog.New(logs)
	f, err := openFiles(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	d, err := start(cfg, log, f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		if status := d.stop(ctx); status != 0 {
			t.Errorf("shutdown: status %d", status)
		}
	})
	return d
}

// gateAuthorizer holds the event loop in its first decision until released.
type gateAuthorizer struct {
	once             sync.Once
	entered, release chan struct{}
}

func (g *gateAuthorizer) Allowed(string, string) bool {
	g.once.Do(func() { close(g.entered) })
	<-g.release
	return true
}

// TestHealthzFollowsTheEventLoop: a stuck loop serves no client, so the
// probes must fail although the HTTP server still answers.
func TestHealthzFollowsTheEventLoop(t *testing.T) {
	d := startInProcess(t, opshttp.Limits{}, io.Discard, "-ops-listen", "127.0.0.1:0")
	ops := "http://" + d.ops.Addr
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := get(t, ops+path); code != 200 {
			t.Fatalf("%s before: %d %q", path, code, body)
		}
	}
	gate := &gateAuthorizer{entered: make(chan struct{}), release: make(chan struct{})}
	if err := d.srv.SetAuthorizer(context.Background(), gate); err != nil {
		t.Fatal(err)
	}
	c := wire.MustDial(t, d.srv.Addr().String(), wire.Options{})
	c.SendAcquire("stuck", testLease)
	select {
	case <-gate.entered:
	case <-time.After(safety):
		t.Fatal("the ACQUIRE did not reach the authorizer")
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := get(t, ops+path); code != 503 || !strings.Contains(body, "event loop did not answer within 1s") {
			t.Errorf("%s with the loop stuck: %d %q, want 503", path, code, body)
		}
	}
	close(gate.release)
	if f, err := c.ReadErr(safety); err != nil || f.Type != protocol.TypeAcquired {
		t.Fatalf("after release: %+v, %v", f, err)
	}
	if code, body := get(t, ops+"/healthz"); code != 200 {
		t.Errorf("/healthz after the loop is back: %d %q", code, body)
	}
}

// TestIdleHTTPConnectionsAreClosed: keep-alive connections on the ops and
// admin ports end after the idle timeout instead of holding a descriptor
// forever; and net/http's own error lines come out through zerolog.
func TestIdleHTTPConnectionsAreClosed(t *testing.T) {
	lim := opshttp.DefaultLimits(1024)
	lim.IdleTimeout = 100 * time.Millisecond
	var logs syncBuffer
	d := startInProcess(t, lim, &logs, "-ops-listen", "127.0.0.1:0", "-admin-listen", "127.0.0.1:0")
	for _, c := range []struct{ addr, path string }{{d.ops.Addr, "/healthz"}, {d.admin.Addr, "/api/info"}} {
		k := keepalive.Dial(t, c.addr)
		if code := k.Get(t, c.path); code != 200 {
			t.Fatalf("%s: %d", c.path, code)
		}
		if _, err := k.R.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("%s: idle connection read %v, want it closed by the server", c.addr, err)
		}
	}

	d.ops.ErrorLog.Print("http: Accept error: accept tcp: too many open files; retrying in 5ms")
	var line map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if strings.Contains(l, "Accept error") {
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatalf("net/http's line is not JSON: %q", l)
			}
		}
	}
	if line["level"] != "error" || line["http_server"] != "ops" {
		t.Errorf("net/http's line came out as %v, want a zerolog error of the ops server", line)
	}
}

// TestHTTPClientsCannotStarveTheLockPort: HTTP clients share the descriptor
// limit with the lock port; however many there are, the lock port keeps
// accepting and the probes keep answering.
func TestHTTPClientsCannotStarveTheLockPort(t *testing.T) {
	p := startServer(t, "-ops-listen", "127.0.0.1:0")
	ops := p.OpsAddr
	maxConns := int(p.Started["http_max_conns"].(float64))
	const headroom = 16
	limit := limitDescriptors(t, p, maxConns+headroom)

	// The cap full of idle keep-alive connections, then more clients than
	// descriptors are left, their requests sent: 2,000 HTTP clients in all.
	for range maxConns {
		if code := keepalive.Dial(t, ops).Get(t, "/healthz"); code != 200 {
			t.Fatalf("/healthz: %d", code)
		}
	}
	for range max(4*headroom, 2000-maxConns) {
		keepalive.Dial(t, ops).Send(t, "/healthz") // no file opens that could free a descriptor by chance
	}

	c := wire.MustDial(t, p.Addr, wire.Options{})
	c.SendAcquire("still-served", testLease)
	if f, err := c.ReadErr(safety); err != nil || f.Type != protocol.TypeAcquired {
		t.Fatalf("lock client: %+v, %v; want ACQUIRED", f, err)
	}
	if code := keepalive.Dial(t, ops).Get(t, "/healthz"); code != 200 {
		t.Errorf("/healthz with the cap full: %d", code)
	}
	if n := openDescriptors(t, p.Pid()); n >= limit {
		t.Errorf("the server holds %d descriptors of %d", n, limit)
	}
}
