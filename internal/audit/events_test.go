package audit

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The audit log's remote_addr is what the admin API and the logs show for
// the same session: net.Addr.String's text.
func TestAppendAddrWritesWhatStringWrites(t *testing.T) {
	var typedNil *net.TCPAddr
	addrs := []net.Addr{
		&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5000},      // 16-byte form, as accept gives
		&net.TCPAddr{IP: net.IP{10, 1, 2, 3}, Port: 1},            // 4-byte form
		&net.TCPAddr{IP: net.ParseIP("2001:db8::1"), Port: 65535}, // IPv6
		&net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 7070, Zone: "eth0"},
		&net.TCPAddr{Port: 5}, // no IP
		typedNil,
		&net.UnixAddr{Name: "/run/monolock.sock", Net: "unix"},
	}
	for _, a := range addrs {
		if got, want := string(appendAddr(nil, a)), a.String(); got != want {
			t.Errorf("appendAddr(%#v) = %q, want %q", a, got, want)
		}
	}
	if got := appendAddr([]byte("x"), nil); string(got) != "x" {
		t.Errorf("appendAddr(nil) appended %q, want nothing", got[1:])
	}
}

// Recording runs on every grant and release, in the owner loop: it must not
// allocate. (The Log's buffer grows to its working size once; averaged over
// the runs that rounds to zero, a per-event allocation does not. The race
// detector's sync.Pool allocates by design, so there only the line is
// checked.)
func TestRecorderDoesNotAllocate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	log, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	rec := NewRecorder(log)
	addr := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 40000}
	now := time.Date(2026, 11, 30, 23, 0, 0, 0, time.UTC)
	allocs := testing.AllocsPerRun(1000, func() {
		rec.Granted(now, "nightly/import", "spiffe://example/worker", addr, 1<<40, time.Millisecond)
		rec.Released(now, "nightly/import", "spiffe://example/worker", addr, 1<<40, time.Second, "graceful")
	})
	if allocs != 0 && !raceEnabled {
		t.Errorf("a grant and a release allocate %v times, want 0", allocs)
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		t.Fatalf("no line in the audit log: %v", sc.Err())
	}
	var line struct {
		Time       string `json:"time"`
		RemoteAddr string `json:"remote_addr"`
	}
	if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
		t.Fatalf("%s: %v", sc.Bytes(), err)
	}
	if line.RemoteAddr != "192.0.2.7:40000" || line.Time != "2026-11-30T23:00:00Z" {
		t.Errorf("line %s: remote_addr %q, time %q", sc.Bytes(), line.RemoteAddr, line.Time)
	}
}
