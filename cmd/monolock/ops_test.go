package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/monolock/monolock/internal/testsupport/wire"
	"github.com/monolock/monolock/protocol"
)

// scrape fetches /metrics and parses the Prometheus text format.
func scrape(t *testing.T, opsAddr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + opsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics is not Prometheus text: %v", err)
	}
	return families
}

// value returns the value of the series of name whose labels include want.
func value(t *testing.T, families map[string]*dto.MetricFamily, name string, want ...string) float64 {
	t.Helper()
	mf, ok := families[name]
	if !ok {
		t.Fatalf("metric %s missing", name)
	}
next:
	for _, m := range mf.Metric {
		for i := 0; i+1 < len(want); i += 2 {
			found := false
			for _, lp := range m.Label {
				found = found || (lp.GetName() == want[i] && lp.GetValue() == want[i+1])
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	t.Fatalf("metric %s%v missing", name, want)
	return 0
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// auditLines reads the audit file; events are flushed asynchronously, so it
// waits until at least n lines are there.
func auditLines(t *testing.T, path string, n int) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		data, err := os.ReadFile(path)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		var lines []map[string]any
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			var line map[string]any
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
				t.Fatalf("audit line is not JSON: %q", sc.Text())
			}
			lines = append(lines, line)
		}
		if len(lines) >= n || time.Now().After(deadline) {
			return lines
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestMetricsHealthAndAudit(t *testing.T) {
	dir := t.TempDir()
	auditPath := filepath.Join(dir, "audit.jsonl")
	p := startServer(t, "-ops-listen", "127.0.0.1:0", "-audit-log", auditPath)
	ops := p.OpsAddr

	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := get(t, "http://"+ops+path); code != 200 || strings.TrimSpace(body) != "ok" {
			t.Fatalf("%s: %d %q", path, code, body)
		}
	}

	holder := wire.MustDial(t, p.Addr, wire.Options{})
	holder.SendAcquire("nightly/a", testLease)
	if f, err := holder.ReadErr(10 * time.Second); err != nil || f.Type != protocol.TypeAcquired {
		t.Fatalf("holder: %+v %v", f, err)
	}
	waiter := wire.MustDial(t, p.Addr, wire.Options{})
	waiter.SendAcquire("nightly/a", testLease)
	if f, err := waiter.ReadErr(10 * time.Second); err != nil || f.Type != protocol.TypeWaiting {
		t.Fatalf("waiter: %+v %v", f, err)
	}
	long := wire.MustDial(t, p.Addr, wire.Options{})
	long.SendAcquire(strings.Repeat("x", 300), testLease)
	if f, err := long.ReadErr(10 * time.Second); err != nil || f.Code != protocol.CodeNameTooLong {
		t.Fatalf("300-byte name: %+v %v", f, err)
	}
	// A silent holder with a 50 ms lease expires.
	silent := wire.MustDial(t, p.Addr, wire.Options{})
	if err := silent.SendErr(wire.Acquire("short", 50)); err != nil {
		t.Fatal(err)
	}
	if _, err := silent.ReadErr(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := silent.ReadErr(10 * time.Second); err != io.EOF {
		t.Fatalf("silent holder: want EOF after its lease, got %v", err)
	}
	// The holder leaves; the waiter is promoted.
	_ = holder.NC.Close()
	if f, err := waiter.ReadErr(10 * time.Second); err != nil || f.Type != protocol.TypeAcquired {
		t.Fatalf("promotion: %+v %v", f, err)
	}

	m := scrape(t, ops)
	checks := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"monolock_connections_active", nil, 1},
		{"monolock_locks_held", nil, 1},
		{"monolock_waiters", nil, 0},
		{"monolock_acquires_total", nil, 3}, // the 300-byte name is no valid ACQUIRE
		{"monolock_protocol_errors_total", []string{"code", "0x15"}, 1},
		{"monolock_releases_total", []string{"reason", "expired"}, 1},
		{"monolock_releases_total", []string{"reason", "graceful"}, 1},
		{"monolock_connections_accepted_total", nil, 4},
		{"monolock_wait_seconds", nil, 3},
		{"monolock_hold_seconds", nil, 2},
	}
	for _, c := range checks {
		if got := value(t, m, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	for _, name := range []string{"monolock_acl_denials_total", "monolock_accept_errors_total", "monolock_evictions_total", "monolock_silent_waiters_evicted_total", "monolock_share_evictions_total", "monolock_newcomers_refused_total", "monolock_tls_handshake_errors_total", "monolock_heartbeats_total", "go_goroutines", "process_resident_memory_bytes"} {
		if _, ok := m[name]; !ok {
			t.Errorf("metric %s missing", name)
		}
	}

	// Audit: granted/released alternate per lock, each line complete.
	lines := auditLines(t, auditPath, 5)
	var events []string
	for _, l := range lines {
		for _, f := range []string{"time", "event", "lock", "identity", "remote_addr"} {
			if _, ok := l[f]; !ok {
				t.Errorf("audit line lacks %q: %v", f, l)
			}
		}
		events = append(events, fmt.Sprintf("%s %s", l["event"], l["lock"]))
	}
	want := []string{"granted nightly/a", "granted short", "released short", "released nightly/a", "granted nightly/a"}
	if strings.Join(events, ",") != strings.Join(want, ",") {
		t.Errorf("audit events %v, want %v", events, want)
	}
	if lines[2]["reason"] != "expired" || lines[3]["reason"] != "graceful" {
		t.Errorf("release reasons: %v, %v", lines[2]["reason"], lines[3]["reason"])
	}
	// Each event names its client by address, also the release the server
	// decided (the expiry), which it closes itself.
	whose := []*wire.Conn{holder, silent, silent, holder, waiter}
	for i, c := range whose {
		if got, want := lines[i]["remote_addr"], c.NC.LocalAddr().String(); got != want {
			t.Errorf("audit line %d (%s %s): remote_addr %q, want %q", i, lines[i]["event"], lines[i]["reason"], got, want)
		}
	}

	// Rotation: after mv and SIGHUP, new events go to a new file at the path.
	rotated := auditPath + ".1"
	if err := os.Rename(auditPath, rotated); err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	p.MustWaitLog(t, "audit log reopened")
	_ = waiter.NC.Close()
	after := auditLines(t, auditPath, 1)
	if len(after) != 1 || after[0]["event"] != "released" {
		t.Fatalf("new audit file: %v", after)
	}
	if old := auditLines(t, rotated, 5); len(old) != 5 {
		t.Fatalf("rotated file changed: %d lines", len(old))
	}
}
