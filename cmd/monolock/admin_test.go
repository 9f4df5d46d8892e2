package main

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/monolock/monolock/internal/testsupport/wire"
	"github.com/monolock/monolock/protocol"
	"github.com/monolock/monolock/protocol/admin"
)

func post(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestAdminAPIWired drives the admin API of the real binary: info, the lock
// listing with the token seen on the wire, a force-release that reaches the
// holder as ERROR 0x02 and promotes the waiter, and its traces in the metrics
// and the audit log.
func TestAdminAPIWired(t *testing.T) {
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
	p := startServer(t, "-ops-listen", "127.0.0.1:0", "-admin-listen", "127.0.0.1:0", "-audit-log", auditPath)
	adminURL := "http://" + p.AdminAddr
	ops := p.OpsAddr

	code, body := get(t, adminURL+"/api/info")
	var info struct {
		Version string         `json:"version"`
		Config  map[string]any `json:"config"`
	}
	if err := json.Unmarshal([]byte(body), &info); code != 200 || err != nil || info.Version == "" || info.Config["listen"] != p.Addr {
		t.Fatalf("/api/info: %d %s (%v)", code, body, err)
	}

	holder := wire.MustDial(t, p.Addr, wire.Options{})
	holder.SendAcquire("nightly/import", testLease)
	granted, err := holder.ReadErr(10 * time.Second)
	if err != nil || granted.Type != protocol.TypeAcquired {
		t.Fatalf("holder: %+v %v", granted, err)
	}
	waiter := wire.MustDial(t, p.Addr, wire.Options{})
	waiter.SendAcquire("nightly/import", testLease)
	if f, err := waiter.ReadErr(10 * time.Second); err != nil || f.Type != protocol.TypeWaiting {
		t.Fatalf("waiter: %+v %v", f, err)
	}

	code, body = get(t, adminURL+"/api/locks?match=nightly/*")
	var list admin.LockList
	if err := json.Unmarshal([]byte(body), &list); code != 200 || err != nil || len(list.Locks) != 1 {
		t.Fatalf("/api/locks: %d %s (%v); want {\"locks\": [one lock]}", code, body, err)
	}
	l := list.Locks[0]
	if l.Name != "nightly/import" || l.Holder.Token != granted.Token || l.Holder.RemoteAddr != holder.NC.LocalAddr().String() ||
		len(l.Waiters) != 1 || l.Waiters[0].RemoteAddr != waiter.NC.LocalAddr().String() {
		t.Fatalf("lock %+v; want token %d, holder %s, waiter %s", l, granted.Token, holder.NC.LocalAddr(), waiter.NC.LocalAddr())
	}

	if code, body := post(t, adminURL+"/api/locks/nightly%2Fimport/release"); code != 200 {
		t.Fatalf("force-release: %d %s", code, body)
	}
	if f, err := holder.ReadErr(10 * time.Second); err != nil || f.Type != protocol.TypeError || f.Code != protocol.CodeClosedByAdmin {
		t.Fatalf("holder after force-release: %+v %v; want ERROR 0x02", f, err)
	}
	if f, err := waiter.ReadErr(10 * time.Second); err != nil || f.Type != protocol.TypeAcquired || f.Token <= granted.Token {
		t.Fatalf("waiter after force-release: %+v %v; want ACQUIRED > %d", f, err, granted.Token)
	}
	if code, _ := get(t, adminURL+"/api/locks/idle-lock"); code != 404 {
		t.Errorf("idle lock: %d, want 404", code)
	}
	if got := value(t, scrape(t, ops), "monolock_releases_total", "reason", "force"); got != 1 {
		t.Errorf(`releases_total{reason="force"} = %v, want 1`, got)
	}
	var events []string
	for _, line := range auditLines(t, auditPath, 4) {
		events = append(events, line["event"].(string))
	}
	if strings.Join(events, ",") != "granted,force_release,released,granted" {
		t.Errorf("audit events %v", events)
	}
}
