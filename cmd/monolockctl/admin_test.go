package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/monolock/monolock/eventloop"
	"github.com/monolock/monolock/internal/adminhttp"
	"github.com/monolock/monolock/internal/audit"
	"github.com/monolock/monolock/internal/testsupport/inproc"
	"github.com/monolock/monolock/internal/testsupport/wire"
	"github.com/monolock/monolock/protocol"
	"github.com/monolock/monolock/protocol/admin"
)

// End-to-end tests of the admin commands: the built binary against a real
// server with the admin API on a loopback listener, and lock holders and
// waiters on raw protocol connections.

// adminServer is a real server with its admin API.
type adminServer struct {
	srv  *inproc.Server
	api  *httptest.Server
	stop func() // shuts both down; safe to call twice
}

func startAdminServer(t *testing.T, log *audit.Log) *adminServer {
	t.Helper()
	var cfg eventloop.Config
	if log != nil {
		cfg.Audit = audit.NewRecorder(log)
	}
	srv := inproc.Start(t, cfg)
	api := httptest.NewServer(adminhttp.New(srv, adminhttp.Info{Version: "v-test", Listen: srv.Addr().String(), IOTimeout: 5 * time.Second}))
	stop := func() {
		api.Close()
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(stop)
	return &adminServer{srv: srv, api: api, stop: stop}
}

// admin runs an admin command against the server's API.
func (s *adminServer) admin(t *testing.T, cmd string, args ...string) (status int, stdout, stderr string) {
	t.Helper()
	return runCtl(t, "", nil, append([]string{cmd, "-admin", s.api.URL}, args...)...)
}

// testLease is long enough that no session expires during a test.
const testLease = 60_000

// holder takes a free lock on a raw protocol connection and returns the
// connection and its token.
func (s *adminServer) holder(t *testing.T, name string) (*wire.Conn, uint64) {
	t.Helper()
	return wire.Holder(t, s.srv.Addr().String(), wire.Options{Safety: patience}, name, testLease)
}

// waiter queues on a held lock; WAITING means it is in the queue.
func (s *adminServer) waiter(t *testing.T, name string) *wire.Conn {
	t.Helper()
	return wire.Waiter(t, s.srv.Addr().String(), wire.Options{Safety: patience}, name, testLease)
}

// row returns the table line whose first column is first.
func row(t *testing.T, out, first string) []string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == first {
			return f
		}
	}
	t.Fatalf("no row %q in:\n%s", first, out)
	return nil
}

// checkAligned checks that each column of a table starts at the same offset
// on every line (the cells hold no spaces).
func checkAligned(t *testing.T, table string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(table, "\n"), "\n")
	starts := func(line string) []int {
		var s []int
		for i := range line {
			if line[i] != ' ' && (i == 0 || line[i-1] == ' ') {
				s = append(s, i)
			}
		}
		return s
	}
	want := fmt.Sprint(starts(lines[0]))
	for _, line := range lines[1:] {
		if got := fmt.Sprint(starts(line)); got != want {
			t.Fatalf("columns not aligned (%s vs %s):\n%s", got, want, table)
		}
	}
}

// keyValues parses the "key:  value" lines up to the first blank line and
// checks that the values are aligned.
func keyValues(t *testing.T, out string) map[string]string {
	t.Helper()
	m := map[string]string{}
	col := -1
	for _, line := range strings.Split(out, "\n") {
		if line == "" {
			break
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			t.Fatalf("not a key: value line %q in:\n%s", line, out)
		}
		at := len(k) + 1 + len(v) - len(strings.TrimLeft(v, " "))
		if col >= 0 && at != col {
			t.Fatalf("values not aligned:\n%s", out)
		}
		col = at
		m[k] = strings.TrimSpace(v)
	}
	return m
}

func TestAdminLocksAndLock(t *testing.T) {
	s := startAdminServer(t, nil)
	h1, tok1 := s.holder(t, "nightly/import")
	w1 := s.waiter(t, "nightly/import")
	w2 := s.waiter(t, "nightly/import")
	h2, tok2 := s.holder(t, "deploy")
	if tok1 < 1<<62 || tok2 <= tok1 {
		t.Fatalf("tokens %d, %d: want about 2^62 and increasing", tok1, tok2)
	}

	status, out, stderr := s.admin(t, "locks")
	if status != 0 {
		t.Fatalf("locks: status %d, stderr %q", status, stderr)
	}
	if !strings.HasPrefix(out, "NAME") || strings.Index(out, "deploy") > strings.Index(out, "nightly/import") {
		t.Fatalf("locks: want a header, then the locks sorted by name:\n%s", out)
	}
	checkAligned(t, out)
	if r := row(t, out, "nightly/import"); r[1] != h1.LocalAddr() || r[2] != fmt.Sprint(tok1) || r[4] != "1m0s" || r[5] != "2" {
		t.Errorf("nightly/import row %q: want holder %s, token %d, lease 1m0s, 2 waiters", r, h1.LocalAddr(), tok1)
	}
	if r := row(t, out, "deploy"); r[1] != h2.LocalAddr() || r[2] != fmt.Sprint(tok2) || r[5] != "0" {
		t.Errorf("deploy row %q: want holder %s, token %d, 0 waiters", r, h2.LocalAddr(), tok2)
	}

	// -match filters, with a glob whose '*' crosses '/'.
	status, out, _ = s.admin(t, "locks", "-match", "night*")
	if status != 0 || !strings.Contains(out, "nightly/import") || strings.Contains(out, "deploy") {
		t.Errorf("locks -match night*: status %d:\n%s", status, out)
	}
	status, out, _ = s.admin(t, "locks", "-match", "nothing-*")
	if status != 0 || !strings.Contains(out, "no held lock matches") {
		t.Errorf("locks -match nothing-*: status %d:\n%s", status, out)
	}

	// One lock: the holder, then the queue in FIFO order.
	status, out, stderr = s.admin(t, "lock", "nightly/import")
	if status != 0 {
		t.Fatalf("lock: status %d, stderr %q", status, stderr)
	}
	got := keyValues(t, out)
	for k, v := range map[string]string{"lock": "nightly/import", "holder": h1.LocalAddr(), "identity": "-", "token": fmt.Sprint(tok1), "lease": "1m0s", "waiters": "2"} {
		if got[k] != v {
			t.Errorf("lock: %s %q, want %q:\n%s", k, got[k], v, out)
		}
	}
	queue := out[strings.Index(out, "#"):]
	checkAligned(t, queue)
	if r1, r2 := row(t, queue, "1"), row(t, queue, "2"); r1[1] != w1.LocalAddr() || r2[1] != w2.LocalAddr() {
		t.Errorf("queue %q, %q: want %s then %s", r1, r2, w1.LocalAddr(), w2.LocalAddr())
	}

	// -json is the API's JSON; the tokens survive exactly.
	// The envelope, as the API sends it: {"locks": [...]}.
	status, out, _ = s.admin(t, "locks", "-json")
	var list admin.LockList
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&list); status != 0 || err != nil || len(list.Locks) != 2 || !strings.HasPrefix(out, "{\n  \"locks\": [") {
		t.Fatalf("locks -json: status %d, %v; want {\"locks\": [two locks]}:\n%s", status, err, out)
	}
	locks := list.Locks
	if l := locks[1]; l.Name != "nightly/import" || l.Holder.Token != tok1 || len(l.Waiters) != 2 || l.Waiters[0].RemoteAddr != w1.LocalAddr() {
		t.Errorf("locks -json: %+v", l)
	}
	if !strings.Contains(out, `"token": `+strconv.FormatUint(tok2, 10)) {
		t.Errorf("locks -json: token %d not printed exactly (or not indented):\n%s", tok2, out)
	}
	status, out, _ = s.admin(t, "lock", "-json", "nightly/import")
	var one admin.LockInfo
	if err := json.Unmarshal([]byte(out), &one); status != 0 || err != nil || one.Holder.Token != tok1 || one.Waiters[1].RemoteAddr != w2.LocalAddr() {
		t.Errorf("lock -json: status %d, %v:\n%s", status, err, out)
	}
}

func TestAdminRelease(t *testing.T) {
	s := startAdminServer(t, nil)
	h, tok := s.holder(t, "nightly/import")
	w := s.waiter(t, "nightly/import")
	status, out, stderr := s.admin(t, "release", "nightly/import")
	if status != 0 || !strings.Contains(out, fmt.Sprintf("token %d", tok)) {
		t.Fatalf("release: status %d, stdout %q, stderr %q", status, out, stderr)
	}
	h.ExpectCodeThenEOF(protocol.CodeClosedByAdmin)
	next := w.Expect(protocol.TypeAcquired).Token
	if next <= tok {
		t.Fatalf("promoted with token %d, not above %d", next, tok)
	}
	status, out, _ = s.admin(t, "lock", "nightly/import")
	if got := keyValues(t, out); status != 0 || got["holder"] != w.LocalAddr() || got["token"] != fmt.Sprint(next) || got["waiters"] != "0" {
		t.Fatalf("after release: status %d:\n%s", status, out)
	}
	// -json: the API's answer.
	status, out, _ = s.admin(t, "release", "-json", "nightly/import")
	var r admin.ReleaseResponse
	if err := json.Unmarshal([]byte(out), &r); status != 0 || err != nil || r.Lock != "nightly/import" || r.ReleasedToken != next {
		t.Fatalf("release -json: status %d, %v:\n%s", status, err, out)
	}
	w.ExpectCodeThenEOF(protocol.CodeClosedByAdmin)
}

func TestAdminKick(t *testing.T) {
	s := startAdminServer(t, nil)
	s.holder(t, "q")
	w1, w2, w3 := s.waiter(t, "q"), s.waiter(t, "q"), s.waiter(t, "q")
	status, out, stderr := s.admin(t, "kick", "q", w2.LocalAddr())
	if status != 0 || !strings.Contains(out, "kicked "+w2.LocalAddr()) {
		t.Fatalf("kick: status %d, stdout %q, stderr %q", status, out, stderr)
	}
	w2.ExpectCodeThenEOF(protocol.CodeClosedByAdmin)
	_, out, _ = s.admin(t, "lock", "q")
	queue := out[strings.Index(out, "#"):]
	if r1, r2 := row(t, queue, "1"), row(t, queue, "2"); r1[1] != w1.LocalAddr() || r2[1] != w3.LocalAddr() || strings.Contains(queue, w2.LocalAddr()) {
		t.Fatalf("queue after kick, want %s then %s:\n%s", w1.LocalAddr(), w3.LocalAddr(), out)
	}
	// The same waiter again: no such waiter.
	status, _, stderr = s.admin(t, "kick", "q", w2.LocalAddr())
	if status != exitNoSuch || !strings.HasPrefix(stderr, "monolockctl: ") || !strings.Contains(stderr, "has no waiter at "+w2.LocalAddr()) {
		t.Fatalf("kick again: status %d, stderr %q; want %d", status, stderr, exitNoSuch)
	}
}

func TestAdminNotFound(t *testing.T) {
	s := startAdminServer(t, nil)
	// A mistyped name or address is pointed at the commands that list the
	// right ones, not at HTTP paths.
	const listLocks = "list the held locks with: monolockctl locks"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"lock", "idle/lock"}, `lock "idle/lock" is idle (no holder, no waiters): check the name, or ` + listLocks},
		{[]string{"release", "idle/lock"}, listLocks},
		{[]string{"kick", "idle/lock", "127.0.0.1:1"}, "has no waiter at 127.0.0.1:1: use an address from the WAITER column of: monolockctl lock idle/lock"},
		{[]string{"kick", "it's mine", "127.0.0.1:1"}, `of: monolockctl lock 'it'\''s mine'`},
		{[]string{"lock", "-json", ".."}, listLocks},
	} {
		status, out, stderr := s.admin(t, tc.args[0], tc.args[1:]...)
		if status != exitNoSuch || out != "" || !strings.HasPrefix(stderr, "monolockctl: lock ") || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, "/api/") {
			t.Errorf("%v: status %d, stdout %q, stderr %q; want %d and %q", tc.args, status, out, stderr, exitNoSuch, tc.want)
		}
	}
}

func TestAdminInfo(t *testing.T) {
	s := startAdminServer(t, nil)
	s.holder(t, "a")
	s.waiter(t, "a")
	status, out, stderr := s.admin(t, "info")
	if status != 0 {
		t.Fatalf("info: status %d, stderr %q", status, stderr)
	}
	got := keyValues(t, out)
	for k, v := range map[string]string{"version": "v-test", "listen": s.srv.Addr().String(), "ops listen": "off", "tls": "off",
		"audit log": "off", "io timeout": "5s", "locks held": "1", "sessions": "2", "waiters": "1", "ha": "off"} {
		if got[k] != v {
			t.Errorf("info: %s %q, want %q:\n%s", k, got[k], v, out)
		}
	}
	status, out, _ = s.admin(t, "info", "-json")
	var in struct {
		Version string `json:"version"`
		Locks   int    `json:"locks"`
		Waiters int    `json:"waiters"`
	}
	if err := json.Unmarshal([]byte(out), &in); status != 0 || err != nil || in.Version != "v-test" || in.Locks != 1 || in.Waiters != 1 {
		t.Fatalf("info -json: status %d, %v:\n%s", status, err, out)
	}
}

// A node of a cluster led through etcd says its role and who leads.
func TestAdminInfoHA(t *testing.T) {
	for _, tc := range []struct {
		ha   admin.HAInfo
		role string
	}{
		{admin.HAInfo{Role: "leader", Serving: true, Leader: "node-a 192.0.2.1:7070", Cluster: "prod", TTLMS: 5000, Terms: 2}, "leader, serving"},
		{admin.HAInfo{Role: "leader", Leader: "node-a 192.0.2.1:7070", Cluster: "prod", TTLMS: 5000, Terms: 2}, "leader, waiting out the longest lease before serving"},
		{admin.HAInfo{Role: "follower", Cluster: "prod", TTLMS: 5000}, "follower"},
	} {
		srv := inproc.Start(t, eventloop.Config{})
		ha := tc.ha
		api := httptest.NewServer(adminhttp.New(srv, adminhttp.Info{Version: "v-test", HA: func() *admin.HAInfo { return &ha }}))
		status, out, stderr := runCtl(t, "", nil, "info", "-admin", api.URL)
		api.Close()
		if status != 0 {
			t.Fatalf("info: status %d, stderr %q", status, stderr)
		}
		got := keyValues(t, out)
		leader := tc.ha.Leader
		if leader == "" {
			leader = "-"
		}
		for k, v := range map[string]string{"ha": tc.role, "ha leader": leader, "ha cluster": "prod", "ha ttl": "5s", "ha terms won": fmt.Sprint(tc.ha.Terms)} {
			if got[k] != v {
				t.Errorf("%s: info: %s %q, want %q:\n%s", tc.role, k, got[k], v, out)
			}
		}
	}
}

// TestAdminAddress: -admin beats MONOLOCK_ADMIN_ADDRESS beats the default;
// host:port and URLs both work.
func TestAdminAddress(t *testing.T) {
	s := startAdminServer(t, nil)
	hostPort := strings.TrimPrefix(s.api.URL, "http://")
	dead := closedAddr(t)
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want int
	}{
		{"flag host:port", nil, []string{"-admin", hostPort}, 0},
		{"flag URL with a slash", nil, []string{"-admin", s.api.URL + "/"}, 0},
		{"environment", []string{"MONOLOCK_ADMIN_ADDRESS=" + s.api.URL}, nil, 0},
		{"flag beats environment", []string{"MONOLOCK_ADMIN_ADDRESS=" + dead}, []string{"-admin", hostPort}, 0},
		{"environment used", []string{"MONOLOCK_ADMIN_ADDRESS=" + dead}, nil, exitUnavailable},
		{"no port", nil, []string{"-admin", "localhost"}, exitUsage},
		{"bad scheme", nil, []string{"-admin", "ftp://" + hostPort}, exitUsage},
	} {
		status, _, stderr := runCtl(t, "", tc.env, append([]string{"info"}, tc.args...)...)
		if status != tc.want {
			t.Errorf("%s: status %d, want %d (stderr %q)", tc.name, status, tc.want, stderr)
		}
	}
}

func TestAdminUnreachable(t *testing.T) {
	dead := closedAddr(t)
	for _, args := range [][]string{{"locks"}, {"lock", "x"}, {"release", "x"}, {"kick", "x", "127.0.0.1:1"}, {"info"}} {
		full := append([]string{args[0], "-admin", dead}, args[1:]...)
		status, _, stderr := runCtl(t, "", nil, full...)
		if status != exitUnavailable || !strings.Contains(stderr, "unreachable") {
			t.Errorf("%v: status %d, stderr %q; want %d", args, status, stderr, exitUnavailable)
		}
	}
}

// TestAdminAPIErrors: an error answer is printed as "monolockctl: message"
// with status 1, a 503 is unavailable, and something that is not the admin
// API is named as such.
func TestAdminAPIErrors(t *testing.T) {
	s := startAdminServer(t, nil)
	status, _, stderr := s.admin(t, "locks", "-match", "")
	if status != exitFailed || !strings.HasPrefix(stderr, "monolockctl: bad match pattern") {
		t.Errorf("empty -match: status %d, stderr %q; want %d and the API's message", status, stderr, exitFailed)
	}
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/info":
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"error":"the lock server did not answer"}`)
		case "/api/locks":
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"error":"boom"}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer fake.Close()
	for _, tc := range []struct {
		args   []string
		status int
		want   string
	}{
		{[]string{"info"}, exitUnavailable, "monolockctl: the lock server did not answer\n"},
		{[]string{"locks"}, exitFailed, "monolockctl: boom\n"},
		{[]string{"lock", "x"}, exitFailed, "not an admin API error"}, // a 404 without JSON is not "no such lock"
	} {
		args := append([]string{tc.args[0], "-admin", fake.URL}, tc.args[1:]...)
		if status, _, stderr := runCtl(t, "", nil, args...); status != tc.status || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: status %d, stderr %q; want %d and %q", tc.args, status, stderr, tc.status, tc.want)
		}
	}
}

// TestAdminAtTheLockPort: -admin pointed at the lock port (which answers,
// but not in HTTP) says so first, with what to set; status 1.
func TestAdminAtTheLockPort(t *testing.T) {
	lockPort := startServer(t).Addr().String()
	status, _, stderr := runCtl(t, "", nil, "info", "-admin", lockPort)
	want := "monolockctl: http://" + lockPort + " does not answer in HTTP: -admin (or MONOLOCK_ADMIN_ADDRESS) must be the server's -admin-listen address, not its lock port ("
	if status != exitFailed || !strings.HasPrefix(stderr, want) {
		t.Fatalf("status %d, stderr %q; want %d and a line starting %q", status, stderr, exitFailed, want)
	}
}

func TestAdminUsage(t *testing.T) {
	checkUsage(t, []usageCase{
		{[]string{"locks", "-h"}, 0, "monolockctl locks -match 'nightly/*'"},
		{[]string{"lock", "-h"}, 0, "Exit status:"},
		{[]string{"release", "-h"}, 0, "Examples:"},
		{[]string{"kick", "-h"}, 0, "REMOTE_ADDR"},
		{[]string{"info", "-h"}, 0, "Examples:"},
		{[]string{"audit-check", "-h"}, 0, "Exit status:"},
		{[]string{"lock"}, exitUsage, "missing NAME"},
		{[]string{"kick", "x"}, exitUsage, "missing REMOTE_ADDR"},
		{[]string{"locks", "extra"}, exitUsage, `unexpected argument "extra"`},
		{[]string{"lock", "x", "-json"}, exitUsage, "flags go before the arguments"},
		{[]string{"lock", strings.Repeat("n", 300)}, exitUsage, "lock name too long"},
		{[]string{"release", ""}, exitUsage, "invalid NAME"},
		{[]string{"info", "-bogus"}, exitUsage, "flag provided but not defined"},
		{[]string{"audit-check"}, exitUsage, "missing FILE"},
		{[]string{"audit-check", "a", "b"}, exitUsage, "unexpected argument"},
	})
}
