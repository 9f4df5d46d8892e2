package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/monolock/monolock/internal/audit"
	"github.com/monolock/monolock/protocol"
)

// TestAuditCheckEndToEnd: the audit log of a real server, with handovers,
// a force-release through monolockctl and a shutdown, passes audit-check; a
// forged grant with a smaller token fails it, naming the line.
func TestAuditCheckEndToEnd(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	log, err := audit.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s := startAdminServer(t, log)
	a, tokA := s.holder(t, "nightly/import")
	b, c := s.waiter(t, "nightly/import"), s.waiter(t, "nightly/import")
	s.holder(t, "deploy")
	_ = a.NC.Close() // hands over to b
	tokB := b.Expect(protocol.TypeAcquired).Token
	if status, _, stderr := s.admin(t, "release", "nightly/import"); status != 0 { // hands over to c
		t.Fatalf("release: status %d, stderr %q", status, stderr)
	}
	b.ExpectCodeThenEOF(protocol.CodeClosedByAdmin)
	tokC := c.Expect(protocol.TypeAcquired).Token
	if !(tokA < tokB && tokB < tokC) {
		t.Fatalf("tokens %d, %d, %d", tokA, tokB, tokC)
	}
	s.stop() // releases c and deploy's holder (shutdown)
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}

	status, out, stderr := runCtl(t, "", nil, "audit-check", path)
	if status != 0 || !strings.Contains(out, "violations: none") || !strings.Contains(out, "granted 4, released 4, force_release 1") ||
		!strings.Contains(out, "still held: 0") || !strings.Contains(out, fmt.Sprint(tokC)) {
		t.Fatalf("audit-check: status %d, stderr %q:\n%s", status, stderr, out)
	}
	clean := readFile(t, path)
	lines := strings.Count(clean, "\n")

	// The same through stdin.
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(ctlPath, "audit-check", "-")
	cmd.Stdin = f
	if out, err := cmd.Output(); err != nil || !strings.Contains(string(out), "violations: none") {
		t.Fatalf("audit-check -: %v:\n%s", err, out)
	}

	// A forged grant of the free lock with an old token.
	forged := fmt.Sprintf(`{"time":"2026-01-01T00:00:00Z","event":"granted","lock":"nightly/import","identity":"","remote_addr":"10.6.6.6:666","token":%d,"wait_ms":0}`, tokA)
	appendLine(t, path, forged)
	status, out, stderr = runCtl(t, "", nil, "audit-check", path)
	want := fmt.Sprintf("line %d: lock \"nightly/import\": granted token %d, not greater than token %d", lines+1, tokA, tokC)
	if status != exitFailed || !strings.Contains(out, want) || !strings.Contains(out, "violations: 1") || !strings.Contains(stderr, "1 violations") {
		t.Fatalf("forged line: status %d, stderr %q, want %d and %q in:\n%s", status, stderr, exitFailed, want, out)
	}

	// A line that is not an event, with the violation before it: the
	// violation decides the status, the bad line is reported.
	appendLine(t, path, `{"time":`)
	status, _, stderr = runCtl(t, "", nil, "audit-check", path)
	if status != exitFailed || !strings.Contains(stderr, fmt.Sprintf("line %d: not a JSON audit event", lines+2)) {
		t.Fatalf("malformed line after a violation: status %d, stderr %q; want %d naming line %d", status, stderr, exitFailed, lines+2)
	}

	// A partial line alone, then a forged grant after it: the check goes on
	// past the bad line and finds the forgery.
	if err := os.WriteFile(path, []byte(clean+`{"time":"2026-01-01T00:00:00Z","ev`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	status, out, stderr = runCtl(t, "", nil, "audit-check", path)
	if status != exitDataErr || !strings.Contains(out, "bad lines:  1") || !strings.Contains(stderr, fmt.Sprintf("line %d: not a JSON audit event", lines+1)) {
		t.Fatalf("partial line: status %d, stderr %q; want %d naming line %d:\n%s", status, stderr, exitDataErr, lines+1, out)
	}
	appendLine(t, path, forged)
	if status, out, _ = runCtl(t, "", nil, "audit-check", path); status != exitFailed || !strings.Contains(out, "violations: 1") {
		t.Fatalf("forged line after a bad line: status %d, want %d:\n%s", status, exitFailed, out)
	}

	if status, _, stderr := runCtl(t, "", nil, "audit-check", path+".missing"); status != exitNoInput {
		t.Fatalf("missing file: status %d, stderr %q; want %d", status, stderr, exitNoInput)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func appendLine(t *testing.T, path, line string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(line + "\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
