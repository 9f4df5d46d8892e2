// Package deploy_test checks the deployment files in deploy/ against the tools
// that read them and against the metrics the server really exports. A check
// whose tool is missing (promtool, keepalived, curl) is skipped with a
// message saying what to install.
package deploy_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/monolock/monolock/internal/metrics"
)

// lookTool finds a tool on PATH or skips the test, saying how to get it.
func lookTool(t *testing.T, name, install string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s is not on PATH, so this check does not run; to run it: %s", name, install)
	}
	return path
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestPrometheusRules(t *testing.T) {
	promtool := lookTool(t, "promtool", "apt-get install prometheus (Debian), or a Prometheus release")
	run(t, promtool, "check", "rules", "prometheus-rules.yaml")
	run(t, promtool, "test", "rules", "prometheus-rules.test.yaml")
}

// idleAudit is an audit log with nothing to report, for its series' names.
type idleAudit struct{}

func (idleAudit) WriteErrors() uint64   { return 0 }
func (idleAudit) DroppedEvents() uint64 { return 0 }
func (idleAudit) PendingBytes() int     { return 0 }

// exported is the set of series names a server with -ops-listen and
// -audit-log exports.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	reg := prometheus.NewRegistry()
	metrics.New(reg)
	metrics.RegisterAudit(reg, idleAudit{})
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
		if f.GetType().String() == "HISTOGRAM" || f.GetType().String() == "SUMMARY" {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				names[f.GetName()+suffix] = true
			}
		}
	}
	return names
}

var seriesName = regexp.MustCompile(`\b(?:monolock|go|process)_[a-z0-9_]+\b`)

// checkSeries fails for every series name in exprs the server does not export.
func checkSeries(t *testing.T, what string, exprs []string) {
	t.Helper()
	have := exported(t)
	used := map[string]bool{}
	for _, e := range exprs {
		for _, name := range seriesName.FindAllString(e, -1) {
			used[name] = true
		}
	}
	if len(used) == 0 {
		t.Fatalf("%s: no series found", what)
	}
	var unknown []string
	for name := range used {
		if !have[name] {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	if len(unknown) > 0 {
		t.Errorf("%s uses series the server does not export: %s", what, strings.Join(unknown, ", "))
	}
}

func TestRulesUseExportedSeries(t *testing.T) {
	data, err := os.ReadFile("prometheus-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var exprs []string
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "#") && !strings.HasPrefix(line, "summary:") && !strings.HasPrefix(line, "description:") {
			exprs = append(exprs, line)
		}
	}
	checkSeries(t, "prometheus-rules.yaml", exprs)
}

// dashboard is the part of a Grafana dashboard the test looks at.
type dashboard struct {
	Title         string  `json:"title"`
	UID           string  `json:"uid"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name string `json:"name"`
			Type string `json:"type"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ H, W, X, Y int } `json:"gridPos"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
}

func TestGrafanaDashboard(t *testing.T) {
	data, err := os.ReadFile("grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	dec := json.NewDecoder(strings.NewReader(string(data)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("grafana-dashboard.json is not a JSON object: %v", err)
	}
	if d.Title == "" || d.UID == "" || d.SchemaVersion == 0 || len(d.Panels) == 0 {
		t.Fatalf("grafana-dashboard.json: title %q, uid %q, schemaVersion %d, %d panels: not an importable dashboard",
			d.Title, d.UID, d.SchemaVersion, len(d.Panels))
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	if vars["datasource"] != "datasource" {
		t.Errorf("want a datasource variable named datasource, so the dashboard imports into any Grafana; have %v", vars)
	}
	ids := map[int]bool{}
	var exprs []string
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d is used twice", p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: gridPos %+v does not fit the 24-column grid", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource must be ${datasource}", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			if q.Expr == "" || q.RefID == "" {
				t.Errorf("panel %q: a target without expr or refId", p.Title)
			}
			exprs = append(exprs, q.Expr)
		}
	}
	checkSeries(t, "grafana-dashboard.json", exprs)
	// Every monolock series has a panel.
	shown := strings.Join(exprs, "\n")
	for name := range exported(t) {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
		if strings.HasPrefix(name, "monolock_") && !strings.Contains(shown, base) {
			t.Errorf("no panel shows %s", name)
		}
	}
}

func TestKeepalivedConfig(t *testing.T) {
	keepalived := lookTool(t, "keepalived", "apt-get install keepalived")
	data, err := os.ReadFile(filepath.Join("keepalived", "keepalived.conf"))
	if err != nil {
		t.Fatal(err)
	}
	// The scripts as installed live in /etc/keepalived; check the ones here.
	dir, err := filepath.Abs("keepalived")
	if err != nil {
		t.Fatal(err)
	}
	conf := strings.ReplaceAll(string(data), "/etc/keepalived/", dir+"/")
	if os.Geteuid() != 0 { // script security needs root-owned scripts; root runs them in production
		conf = strings.NewReplacer("script_user root", "", "enable_script_security", "").Replace(conf)
	}
	path := filepath.Join(t.TempDir(), "keepalived.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, keepalived, "--config-test", "-f", path)
}

// The notify script kills and stops monolock when, and only when, this host
// stops being the primary.
func TestKeepalivedNotifyFencesTheOldPrimary(t *testing.T) {
	script, err := filepath.Abs(filepath.Join("keepalived", "notify_monolock.sh"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	calls := filepath.Join(dir, "systemctl.log")
	fake := filepath.Join(dir, "systemctl")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho \"$*\" >> '"+calls+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	notify := func(state string) {
		t.Helper()
		cmd := exec.Command("sh", script, "INSTANCE", "monolock", state, "150")
		cmd.Env = append(os.Environ(), "SYSTEMCTL="+fake, "MONOLOCK_VRRP_STATE_DIR="+filepath.Join(dir, "state"))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("notify %s: %v\n%s", state, err, out)
		}
	}
	for _, state := range []string{"BACKUP", "MASTER", "BACKUP", "FAULT", "MASTER", "FAULT"} {
		notify(state)
	}
	got, _ := os.ReadFile(calls)
	fence := "kill --signal=SIGKILL monolock.service\nstop monolock.service\n"
	want := "start monolock.service\n" + fence + "start monolock.service\n" + fence
	if string(got) != want {
		t.Errorf("systemctl calls for BACKUP, MASTER, BACKUP, FAULT, MASTER, FAULT:\n%s\nwant:\n%s", got, want)
	}
}

// The check script passes on 200 from /readyz and fails on 503 or no answer.
func TestKeepalivedCheck(t *testing.T) {
	lookTool(t, "curl", "apt-get install curl")
	script, err := filepath.Abs(filepath.Join("keepalived", "check_monolock.sh"))
	if err != nil {
		t.Fatal(err)
	}
	var status atomic.Int32
	status.Store(http.StatusOK)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(int(status.Load()))
	}))
	check := func(addr string) error {
		cmd := exec.Command("sh", script)
		cmd.Env = append(os.Environ(), "MONOLOCK_OPS_ADDRESS="+addr)
		return cmd.Run()
	}
	addr := strings.TrimPrefix(srv.URL, "http://")
	if err := check(addr); err != nil {
		t.Errorf("/readyz 200: %v, want success", err)
	}
	status.Store(http.StatusServiceUnavailable)
	if err := check(addr); err == nil {
		t.Error("/readyz 503: success, want failure")
	}
	srv.Close()
	if err := check(addr); err == nil {
		t.Error("nothing listening: success, want failure")
	}
}
