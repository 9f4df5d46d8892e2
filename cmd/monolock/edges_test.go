package main

import (
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

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
			status := run(c.args, env(c.env), &stderr)
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
