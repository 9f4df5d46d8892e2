package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monolock/monolock/client"
	"github.com/monolock/monolock/internal/certs/certstest"
)

// End-to-end tests: the built monolockctl binary against an in-process server.

func holdLock(t *testing.T, addr, name string) *client.Lock {
	t.Helper()
	l, err := client.New(client.Config{Address: addr}).Acquire(t.Context(), name, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// TestRunSerializes: three processes on one lock run their commands strictly
// one after another, each with a larger MONOLOCK_TOKEN.
func TestRunSerializes(t *testing.T) {
	addr := startServer(t).Addr().String()
	logPath := filepath.Join(t.TempDir(), "log")
	script := `echo "start $MONOLOCK_TOKEN $MONOLOCK_LOCK" >> "$LOG"; sleep 0.2; echo "end $MONOLOCK_TOKEN" >> "$LOG"`
	var ctls []*ctl
	for range 3 {
		ctls = append(ctls, startCtl(t, addr, []string{"LOG=" + logPath}, "run", "serial", "--", "sh", "-c", script))
	}
	for _, c := range ctls {
		if status, _, stderr := c.wait(t); status != 0 {
			t.Fatalf("status %d, stderr %q", status, stderr)
		}
	}
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 6 {
		t.Fatalf("log:\n%s", b)
	}
	var prev uint64
	for i := 0; i < len(lines); i += 2 {
		start, end := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(start) != 3 || start[0] != "start" || start[2] != "serial" || len(end) != 2 || end[0] != "end" || end[1] != start[1] {
			t.Fatalf("commands overlapped or lacked their environment:\n%s", b)
		}
		token, err := strconv.ParseUint(start[1], 10, 64)
		if err != nil || token <= prev {
			t.Fatalf("tokens not increasing:\n%s", b)
		}
		prev = token
	}
}

func TestRunExitStatus(t *testing.T) {
	addr := startServer(t).Addr().String()
	for _, tc := range []struct {
		argv []string
		want int
	}{
		{[]string{"true"}, 0},
		{[]string{"sh", "-c", "exit 3"}, 3},
		{[]string{"sh", "-c", "kill -TERM $$"}, 128 + int(syscall.SIGTERM)},
		{[]string{"/nonexistent/command"}, exitNotFound},
	} {
		args := append([]string{"run", "status", "--"}, tc.argv...)
		if status, _, stderr := runCtl(t, addr, nil, args...); status != tc.want {
			t.Errorf("%v: status %d, want %d (stderr %q)", tc.argv, status, tc.want, stderr)
		}
	}
}

func TestRunBusy(t *testing.T) {
	addr := startServer(t).Addr().String()
	holdLock(t, addr, "busy")
	for _, flag := range [][]string{{"-no-wait"}, {"-wait", "200ms"}} {
		args := append(append([]string{"run"}, flag...), "busy", "--", "sh", "-c", "echo ran")
		status, stdout, stderr := runCtl(t, addr, nil, args...)
		if status != exitBusy || stdout != "" || !strings.Contains(stderr, "busy") {
			t.Errorf("%v: status %d, stdout %q, stderr %q; want %d, nothing run", flag, status, stdout, stderr, exitBusy)
		}
	}
}

func TestRunNameTooLongExitsWithoutDialing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	status, _, stderr := runCtl(t, ln.Addr().String(), nil, "run", strings.Repeat("n", 300), "--", "true")
	if status != exitUsage || !strings.Contains(stderr, "lock name too long") {
		t.Fatalf("status %d, stderr %q; want %d naming the problem", status, stderr, exitUsage)
	}
	// Nothing connected: an accept finds no one.
	_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(50 * time.Millisecond))
	if c, err := ln.Accept(); err == nil {
		_ = c.Close()
		t.Fatal("monolockctl connected to the server")
	}
}

// TestRunUnreachable: nothing at the address is "unavailable", and the
// message asks whether the server runs there, says where the address came
// from and how to set it.
func TestRunUnreachable(t *testing.T) {
	dead := closedAddr(t)
	for _, tc := range []struct {
		addr string
		env  []string
		from string
	}{
		{dead, nil, "from -addr"},
		{"", []string{"MONOLOCK_ADDRESS=" + dead}, "from MONOLOCK_ADDRESS"},
	} {
		status, _, stderr := runCtl(t, tc.addr, tc.env, "run", "x", "--", "true")
		want := fmt.Sprintf("connection refused; is the server running and listening on %s (%s)? Set its address with -addr or MONOLOCK_ADDRESS\n", dead, tc.from)
		if status != exitUnavailable || !strings.HasSuffix(stderr, want) {
			t.Errorf("%s: status %d, stderr %q; want %d and a line ending %q", tc.from, status, stderr, exitUnavailable, want)
		}
	}
}

// TestRunAddressFromEnvironment: MONOLOCK_ADDRESS applies without -addr.
func TestRunAddressFromEnvironment(t *testing.T) {
	addr := startServer(t).Addr().String()
	if status, _, stderr := runCtl(t, "", []string{"MONOLOCK_ADDRESS=" + addr}, "run", "env", "--", "true"); status != 0 {
		t.Fatalf("status %d, stderr %q", status, stderr)
	}
}

// TestRunLockLostStopsCommand: a loss while the command runs sends it SIGTERM
// (then SIGKILL if it ignores that) and exits 76.
func TestRunLockLostStopsCommand(t *testing.T) {
	for _, tc := range []struct {
		name, trap, wantOut string
	}{
		{"SIGTERM", `trap "echo got TERM; exit 0" TERM`, "got TERM"},
		{"SIGKILL after the grace", `trap "" TERM`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startServer(t)
			c := startCtl(t, srv.Addr().String(), nil, "run", "lost", "--", "sh", "-c",
				tc.trap+`; echo ready; while :; do sleep 0.05; done`)
			c.waitLine(t, "ready")
			ctx, cancel := context.WithTimeout(context.Background(), patience)
			defer cancel()
			if err := srv.Shutdown(ctx); err != nil { // every session gets ERROR 0x01
				t.Fatal(err)
			}
			status, stdout, stderr := c.wait(t)
			if status != exitLost || !strings.Contains(stdout, tc.wantOut) || strings.Count(stderr, "lock lost") != 1 {
				t.Fatalf("status %d, stdout %q, stderr %q; want %d and the loss reported once", status, stdout, stderr, exitLost)
			}
		})
	}
}

func TestRunForwardsSignals(t *testing.T) {
	addr := startServer(t).Addr().String()
	c := startCtl(t, addr, nil, "run", "signals", "--", "sh", "-c",
		`trap "echo got INT; exit 7" INT; echo ready; while :; do sleep 0.05; done`)
	c.waitLine(t, "ready")
	if err := c.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if status, stdout, stderr := c.wait(t); status != 7 || !strings.Contains(stdout, "got INT") {
		t.Fatalf("status %d, stdout %q, stderr %q; want 7 from the command's trap", status, stdout, stderr)
	}
}

// TestRunSignalWhileWaiting: INT, TERM, HUP or QUIT while queued ends the
// wait with 128+N, and nothing runs.
func TestRunSignalWhileWaiting(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sigName(sig), func(t *testing.T) {
			srv := startServer(t)
			addr := srv.Addr().String()
			holdLock(t, addr, "queued")
			c := startCtl(t, addr, nil, "run", "queued", "--", "sh", "-c", "echo ran")
			// Await the queued session on the server (bounded polling of its state).
			deadline := time.Now().Add(patience)
			for {
				st, err := srv.Stats(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if st.Waiters == 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("monolockctl never queued")
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err := c.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if status, stdout, _ := c.wait(t); status != 128+int(sig) || stdout != "" {
				t.Fatalf("status %d, stdout %q; want %d and nothing run", status, stdout, 128+int(sig))
			}
		})
	}
}

func TestUsage(t *testing.T) {
	checkUsage(t, []usageCase{
		{[]string{"-h"}, 0, "Examples:"},
		{[]string{"run", "-h"}, 0, "Exit status:"},
		{nil, exitUsage, "Commands:"},
		{[]string{"frobnicate"}, exitUsage, `unknown command "frobnicate"`},
		{[]string{"run"}, exitUsage, "missing NAME"},
		{[]string{"run", "x", "true"}, exitUsage, "expected --"},
		{[]string{"run", "x", "--"}, exitUsage, "missing COMMAND"},
		{[]string{"run", "x", "-lease", "2s", "--", "true"}, exitUsage, `"-lease" after NAME: flags go before NAME (monolockctl run [FLAGS] NAME -- COMMAND [ARGS...])`},
		{[]string{"run", "x", "-no-wait", "--", "true"}, exitUsage, "flags go before NAME"},
		{[]string{"run", "x", "-", "true"}, exitUsage, "expected -- after NAME"},
		{[]string{"run", "-no-wait", "-wait", "1s", "x", "--", "true"}, exitUsage, "exclude each other"},
		{[]string{"run", "-lease", "0s", "x", "--", "true"}, exitUsage, "-lease 0s is shorter than the minimum lease of 1ms"},
		{[]string{"run", "-lease", "1ns", "x", "--", "true"}, exitUsage, "-lease 1ns is shorter than the minimum lease of 1ms"},
		{[]string{"run", "-lease", "2000h", "x", "--", "true"}, exitUsage, "longer than the maximum lease"},
		{[]string{"run", "-bogus", "x", "--", "true"}, exitUsage, "flag provided but not defined"},
		{[]string{"run", "-tls-ca", "/nonexistent.pem", "x", "--", "true"}, exitUsage, "-tls-ca"},
	})
}

// TestRunUntrustedServerIsAClientError: a server whose certificate does not
// verify against -tls-ca is a setup mistake on this side (exit 2), not an
// unavailable server, and retrying would not help.
func TestRunUntrustedServerIsAClientError(t *testing.T) {
	p := certstest.NewPKI(t, t.TempDir())
	srvCert, err := tls.LoadX509KeyPair(p.Server.Cert, p.Server.Key)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{srvCert}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			_ = c.Close()
		}
	}()
	status, _, stderr := runCtl(t, ln.Addr().String(), nil, "run", "-tls-ca", p.OtherCA, "x", "--", "true")
	if status != exitUsage || !strings.Contains(stderr, "certificate") {
		t.Fatalf("status %d, stderr %q; want %d and the verification error", status, stderr, exitUsage)
	}
}

// TestRunSeveralAddresses: a closed port first, the server second (one
// -addr with a comma, and repeated -addr): the command runs under the lock
// the server granted.
func TestRunSeveralAddresses(t *testing.T) {
	addr := startServer(t).Addr().String()
	dead := closedAddr(t)
	for _, flags := range [][]string{{"-addr", dead + "," + addr}, {"-addr", dead, "-addr", addr}} {
		args := append(append([]string{"run"}, flags...), "several", "--", "sh", "-c", "echo ran")
		status, stdout, stderr := runCtl(t, "", nil, args...)
		if status != 0 || stdout != "ran\n" {
			t.Errorf("%v: status %d, stdout %q, stderr %q; want the command run", flags, status, stdout, stderr)
		}
	}
}
