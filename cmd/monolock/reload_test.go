package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSIGHUPRefusesWhatItMustNotRead runs the server with TLS, an ACL and an
// audit log, puts at one of their paths what a reload must not read — a FIFO
// nobody writes to (which a plain open waits on for ever) or a 256 MiB file —
// and sends SIGHUP, then SIGTERM: the reload is refused with a line that
// says what was wrong, and the process exits with status 0. Every wait is
// for an event (a log line, the exit).
func TestSIGHUPRefusesWhatItMustNotRead(t *testing.T) {
	fifo := func(t *testing.T, path string) {
		if err := os.Rename(path, path+".moved"); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mkfifo(path, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	huge := func(t *testing.T, path string) {
		if err := os.Truncate(path, 256<<20); err != nil { // sparse: no disk
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name    string
		path    func(aclPath, caPath, auditPath string) string
		replace func(t *testing.T, path string)
		line    string // the reload's log line
		why     string // in its error
	}{
		{"FIFO at the ACL path", func(a, _, _ string) string { return a }, fifo, "SIGHUP: ACL not reloaded", "not a regular file (a FIFO)"},
		{"FIFO at the client CA path", func(_, c, _ string) string { return c }, fifo, "SIGHUP: TLS files not reloaded", "not a regular file (a FIFO)"},
		{"FIFO at the audit log path", func(_, _, l string) string { return l }, fifo, "SIGHUP: cannot reopen the audit log", "FIFO"},
		{"256 MiB at the ACL path", func(a, _, _ string) string { return a }, huge, "SIGHUP: ACL not reloaded", "file too large: 268435456 bytes"},
		{"256 MiB at the client CA path", func(_, c, _ string) string { return c }, huge, "SIGHUP: TLS files not reloaded", "file too large: 268435456 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, pki, aclPath := labFiles(t)
			auditPath := filepath.Join(dir, "audit.jsonl")
			p := startServer(t, "-tls-cert", pki.Server.Cert, "-tls-key", pki.Server.Key, "-tls-client-ca", pki.CA,
				"-acl-file", aclPath, "-audit-log", auditPath)
			tc.replace(t, tc.path(aclPath, pki.CA, auditPath))
			if err := p.Signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
			line := p.MustWaitLog(t, tc.line)
			if why, _ := line["error"].(string); !strings.Contains(why, tc.why) {
				t.Errorf("%q: error %q, want it to say %q", tc.line, why, tc.why)
			}
			if err := p.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if !p.WaitExit(safety) {
				t.Fatal("the server still runs after SIGTERM")
			}
			if err := p.Err(); err != nil {
				t.Fatalf("exit %v after SIGTERM, want status 0", err)
			}
		})
	}
}
