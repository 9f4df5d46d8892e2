package adminhttp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/monolock/monolock/eventloop"
	"github.com/monolock/monolock/internal/adminhttp"
	"github.com/monolock/monolock/internal/glob"
	"github.com/monolock/monolock/internal/testsupport/inproc"
	"github.com/monolock/monolock/internal/testsupport/wire"
	"github.com/monolock/monolock/protocol"
	"github.com/monolock/monolock/protocol/admin"
)

// safety bounds every blocking wait: a net against a hung test, never a
// timing assertion.
const safety = 5 * time.Second

// longLease is a lease no test outlives, for sessions that never heartbeat.
const longLease = 120_000

// env is a real server on a loopback port with the admin API in front of it.
type env struct {
	srv *eventloop.Server
	api *httptest.Server
}

func start(t *testing.T) *env {
	return startWith(t, adminhttp.Info{Version: "test"})
}

func startWith(t *testing.T, info adminhttp.Info) *env {
	t.Helper()
	srv := inproc.Start(t, eventloop.Config{})
	api := httptest.NewServer(adminhttp.New(srv, info))
	t.Cleanup(api.Close) // before the server stops: cleanups run last first
	return &env{srv: srv.Server, api: api}
}

// holder acquires a free lock on a raw protocol connection and returns the
// connection and its token.
func (e *env) holder(t *testing.T, name string) (*wire.Conn, uint64) {
	t.Helper()
	return wire.Holder(t, e.srv.Addr().String(), wire.Options{Safety: safety}, name, longLease)
}

// waiter queues on a busy lock; WAITING means it is in the queue.
func (e *env) waiter(t *testing.T, name string) *wire.Conn {
	t.Helper()
	return wire.Waiter(t, e.srv.Addr().String(), wire.Options{Safety: safety}, name, longLease)
}

// response is an HTTP answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (e *env) do(t *testing.T, method, path string) response {
	t.Helper()
	return do(t, method, e.api.URL+path)
}

func do(t *testing.T, method, rawURL string) response {
	t.Helper()
	return doWith(t, method, rawURL, nil)
}

// doWith sends a request with these headers added.
func doWith(t *testing.T, method, rawURL string, headers map[string]string) response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, rawURL, nil)
	if err != nil {
		t.Fatalf("NewRequest %s %s: %v", method, rawURL, err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, rawURL, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, rawURL, err)
	}
	return response{status: res.StatusCode, header: res.Header, body: body}
}

// decode checks the status and the content type and decodes the JSON body.
func (r response) decode(t *testing.T, status int, v any) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q, want application/json", ct)
	}
	dec := json.NewDecoder(strings.NewReader(string(r.body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decoding %s: %v", r.body, err)
	}
}

// wantError checks a JSON error answer.
func (r response) wantError(t *testing.T, status int) string {
	t.Helper()
	var e admin.ErrorResponse
	r.decode(t, status, &e)
	if e.Error == "" {
		t.Fatalf("error body without a message: %s", r.body)
	}
	return e.Error
}

// lockPath escapes name as one path segment, as monolockctl does: "." and
// ".." too, which url.PathEscape leaves alone.
func lockPath(name string) string {
	esc := url.PathEscape(name)
	if esc == "." || esc == ".." {
		esc = strings.ReplaceAll(esc, ".", "%2E")
	}
	return "/api/locks/" + esc
}

func addrs(ws []admin.WaiterInfo) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.RemoteAddr
	}
	return out
}

// checkLock compares a LockInfo with what the clients saw on the wire.
func checkLock(t *testing.T, got admin.LockInfo, name string, holder *wire.Conn, token uint64, waiters ...*wire.Conn) {
	t.Helper()
	if got.Name != name {
		t.Errorf("name %q, want %q", got.Name, name)
	}
	if got.Holder.Token != token {
		t.Errorf("%q: holder token %d, want %d (the token the client got on the wire)", name, got.Holder.Token, token)
	}
	if got.Holder.RemoteAddr != holder.LocalAddr() {
		t.Errorf("%q: holder remote_addr %q, want %q", name, got.Holder.RemoteAddr, holder.LocalAddr())
	}
	if got.Holder.LeaseMS != longLease {
		t.Errorf("%q: holder lease_ms %d, want %d", name, got.Holder.LeaseMS, longLease)
	}
	if got.Holder.Since.IsZero() || got.Holder.Identity != "" {
		t.Errorf("%q: holder since %v identity %q, want a time and no identity", name, got.Holder.Since, got.Holder.Identity)
	}
	if got.Holder.LastHeartbeat.IsZero() {
		t.Errorf("%q: holder without a last_heartbeat", name)
	}
	want := make([]string, len(waiters))
	for i, w := range waiters {
		want[i] = w.LocalAddr()
	}
	if g := addrs(got.Waiters); !slices.Equal(g, want) {
		t.Errorf("%q: waiters %v, want %v in FIFO order", name, g, want)
	}
	for i, w := range got.Waiters {
		if w.Position != i+1 {
			t.Errorf("%q: waiter %d has position %d, want %d", name, i, w.Position, i+1)
		}
		if w.QueuedAt.IsZero() || (i > 0 && w.QueuedAt.Before(got.Waiters[i-1].QueuedAt)) {
			t.Errorf("%q: waiter %d queued_at %v out of order", name, i, w.QueuedAt)
		}
	}
}

func TestListAndGet(t *testing.T) {
	t.Parallel()
	e := start(t)
	imp, impTok := e.holder(t, "nightly/import")
	w1 := e.waiter(t, "nightly/import")
	w2 := e.waiter(t, "nightly/import")
	w3 := e.waiter(t, "nightly/import")
	exp, expTok := e.holder(t, "nightly/export/eu")
	other, otherTok := e.holder(t, "nightly")

	var list admin.LockList
	e.do(t, "GET", "/api/locks").decode(t, 200, &list)
	all := list.Locks
	if len(all) != 3 {
		t.Fatalf("GET /api/locks: %d locks, want 3: %+v", len(all), all)
	}
	checkLock(t, all[0], "nightly", other, otherTok)
	checkLock(t, all[1], "nightly/export/eu", exp, expTok)
	checkLock(t, all[2], "nightly/import", imp, impTok, w1, w2, w3)
	// Nobody heartbeats here: the server last heard each holder at its
	// ACQUIRE, the turn that granted it.
	for _, l := range all {
		if !l.Holder.LastHeartbeat.Equal(l.Holder.Since) {
			t.Errorf("%q: last_heartbeat %v, want its ACQUIRE's time, since %v", l.Name, l.Holder.LastHeartbeat, l.Holder.Since)
		}
	}
	if all[0].Waiters == nil {
		t.Error("a lock without waiters must show waiters: [], not null")
	}

	// The filter: '*' crosses '/', and "nightly/*" does not match "nightly".
	for _, q := range []string{"?match=nightly/*", "?match=" + url.QueryEscape("nightly/*")} {
		var list admin.LockList
		e.do(t, "GET", "/api/locks"+q).decode(t, 200, &list)
		matched := list.Locks
		if len(matched) != 2 {
			t.Fatalf("GET /api/locks%s: %d locks, want 2: %+v", q, len(matched), matched)
		}
		checkLock(t, matched[0], "nightly/export/eu", exp, expTok)
		checkLock(t, matched[1], "nightly/import", imp, impTok, w1, w2, w3)
	}

	var one admin.LockInfo
	e.do(t, "GET", "/api/locks/nightly%2Fimport").decode(t, 200, &one)
	checkLock(t, one, "nightly/import", imp, impTok, w1, w2, w3)

	// HEAD answers like GET, without a body.
	if r := e.do(t, "HEAD", "/api/locks/nightly%2Fimport"); r.status != 200 || len(r.body) != 0 {
		t.Errorf("HEAD: status %d body %q, want 200 and no body", r.status, r.body)
	}
}

// TestListEnvelope: the list is an object whose "locks" is always an
// array, [] when empty, so that jq '.locks[]' works on any answer.
func TestListEnvelope(t *testing.T) {
	t.Parallel()
	e := start(t)
	const empty = `{"locks":[],"total":0,"next":""}`
	for _, path := range []string{"/api/locks", "/api/locks?match=*"} {
		r := e.do(t, "GET", path)
		if r.status != 200 || strings.TrimSpace(string(r.body)) != empty {
			t.Errorf("GET %s on an idle server: %d %s, want 200 %s", path, r.status, r.body, empty)
		}
	}
	e.holder(t, "a")
	if r := e.do(t, "GET", "/api/locks?match=b*"); r.status != 200 || strings.TrimSpace(string(r.body)) != empty {
		t.Errorf("GET with a filter matching nothing: %d %s, want 200 %s", r.status, r.body, empty)
	}
	var raw map[string]json.RawMessage
	e.do(t, "GET", "/api/locks").decode(t, 200, &raw)
	if len(raw) != 3 || !strings.HasPrefix(string(raw["locks"]), `[{"name":"a",`) || string(raw["total"]) != "1" {
		t.Errorf(`GET /api/locks: %v, want "locks": [{"name":"a",…}], "total": 1 and "next"`, raw)
	}
}

func TestBadGlob(t *testing.T) {
	t.Parallel()
	e := start(t)
	msg := e.do(t, "GET", "/api/locks?match=").wantError(t, 400)
	if !strings.Contains(msg, "pattern") {
		t.Errorf("error %q should name the pattern as the problem", msg)
	}
}

func TestIdleIs404(t *testing.T) {
	t.Parallel()
	e := start(t)
	_, _ = e.holder(t, "busy")
	w := e.waiter(t, "busy")
	for _, c := range []struct{ method, path string }{
		{"GET", "/api/locks/idle"},
		{"GET", "/api/locks/nightly%2Fidle"},
		{"POST", "/api/locks/idle/release"},
		{"DELETE", "/api/locks/idle/waiters/" + url.PathEscape(w.LocalAddr())},
		{"DELETE", "/api/locks/busy/waiters/127.0.0.1:1"},
	} {
		msg := e.do(t, c.method, c.path).wantError(t, 404)
		if c.method == "GET" && !strings.Contains(msg, "idle") {
			t.Errorf("%s %s: error %q should say the lock is idle", c.method, c.path, msg)
		}
	}
}

func TestForceRelease(t *testing.T) {
	t.Parallel()
	e := start(t)
	const name = "deploy/prod"
	h, tok := e.holder(t, name)
	w1 := e.waiter(t, name)
	w2 := e.waiter(t, name)

	var res admin.ReleaseResponse
	e.do(t, "POST", lockPath(name)+"/release").decode(t, 200, &res)
	if res.Lock != name || res.ReleasedToken != tok {
		t.Fatalf("release answered %+v, want lock %q and released_token %d", res, name, tok)
	}
	h.ExpectCodeThenEOF(protocol.CodeClosedByAdmin)
	next := w1.Expect(protocol.TypeAcquired).Token
	if next <= tok {
		t.Fatalf("promoted waiter got token %d, want more than %d", next, tok)
	}

	var now admin.LockInfo
	e.do(t, "GET", lockPath(name)).decode(t, 200, &now)
	checkLock(t, now, name, w1, next, w2)

	// Releasing again takes it from the promoted holder; then it is idle.
	e.do(t, "POST", lockPath(name)+"/release").decode(t, 200, &res)
	w1.ExpectCodeThenEOF(protocol.CodeClosedByAdmin)
	last := w2.Expect(protocol.TypeAcquired).Token
	e.do(t, "POST", lockPath(name)+"/release").decode(t, 200, &res)
	if res.ReleasedToken != last {
		t.Fatalf("released_token %d, want %d", res.ReleasedToken, last)
	}
	w2.ExpectCodeThenEOF(protocol.CodeClosedByAdmin)
	e.do(t, "GET", lockPath(name)).wantError(t, 404)
	e.do(t, "POST", lockPath(name)+"/release").wantError(t, 404)
}

func TestKickWaiter(t *testing.T) {
	t.Parallel()
	e := start(t)
	const name = "shard-7"
	h, tok := e.holder(t, name)
	w1 := e.waiter(t, name)
	w2 := e.waiter(t, name)
	w3 := e.waiter(t, name)

	var res admin.KickResponse
	e.do(t, "DELETE", lockPath(name)+"/waiters/"+url.PathEscape(w2.LocalAddr())).decode(t, 200, &res)
	if res.Lock != name || res.Kicked != w2.LocalAddr() {
		t.Fatalf("kick answered %+v, want lock %q kicked %q", res, name, w2.LocalAddr())
	}
	w2.ExpectCodeThenEOF(protocol.CodeClosedByAdmin)

	var now admin.LockInfo
	e.do(t, "GET", lockPath(name)).decode(t, 200, &now)
	checkLock(t, now, name, h, tok, w1, w3)

	// The others are untouched: still waiting, still holding.
	for _, c := range []*wire.Conn{w1, w3} {
		c.SendHeartbeat()
		c.Expect(protocol.TypeWaiting)
	}
	h.SendHeartbeat()
	if got := h.Expect(protocol.TypeAcquired).Token; got != tok {
		t.Fatalf("holder's heartbeat answered token %d, want %d", got, tok)
	}
	// The answered heartbeat is the last the server heard from the holder.
	var beat admin.LockInfo
	e.do(t, "GET", lockPath(name)).decode(t, 200, &beat)
	if !beat.Holder.LastHeartbeat.After(now.Holder.LastHeartbeat) {
		t.Errorf("after a HEARTBEAT, last_heartbeat %v, want later than %v", beat.Holder.LastHeartbeat, now.Holder.LastHeartbeat)
	}

	// Kicking it again, or kicking the holder as a waiter, is a 404.
	e.do(t, "DELETE", lockPath(name)+"/waiters/"+url.PathEscape(w2.LocalAddr())).wantError(t, 404)
	e.do(t, "DELETE", lockPath(name)+"/waiters/"+url.PathEscape(h.LocalAddr())).wantError(t, 404)

	// Unescaped ':' in the address works too.
	e.do(t, "DELETE", lockPath(name)+"/waiters/"+w3.LocalAddr()).decode(t, 200, &res)
	w3.ExpectCodeThenEOF(protocol.CodeClosedByAdmin)
	e.do(t, "GET", lockPath(name)).decode(t, 200, &now)
	checkLock(t, now, name, h, tok, w1)
}

func TestEncodedNames(t *testing.T) {
	t.Parallel()
	e := start(t)
	names := []string{
		"nightly/import",
		"/leading/slash/",
		"a//b",
		"with space",
		"100%",
		"%2F is not a slash",
		"a+b",
		"q?x#y&z=1",
		"..",
		".",
		"日本/語",
		"emoji 😀",
		"semi;colon",
	}
	tokens := map[string]uint64{}
	holders := map[string]*wire.Conn{}
	for _, name := range names {
		holders[name], tokens[name] = e.holder(t, name)
	}
	for _, name := range names {
		var got admin.LockInfo
		e.do(t, "GET", lockPath(name)).decode(t, 200, &got)
		checkLock(t, got, name, holders[name], tokens[name])
	}

	var list admin.LockList
	e.do(t, "GET", "/api/locks?match="+url.QueryEscape("日本/?")).decode(t, 200, &list)
	matched := list.Locks
	if len(matched) != 1 || matched[0].Name != "日本/語" {
		t.Errorf("match 日本/? returned %+v, want only 日本/語", matched)
	}

	// Force-release through an encoded name.
	var res admin.ReleaseResponse
	e.do(t, "POST", lockPath("日本/語")+"/release").decode(t, 200, &res)
	if res.Lock != "日本/語" || res.ReleasedToken != tokens["日本/語"] {
		t.Errorf("release answered %+v", res)
	}
	holders["日本/語"].ExpectCodeThenEOF(protocol.CodeClosedByAdmin)

	// An unencoded '/' splits the name: a 404 that says how to encode it.
	msg := e.do(t, "GET", "/api/locks/nightly/import").wantError(t, 404)
	if !strings.Contains(msg, "nightly%2Fimport") {
		t.Errorf("404 for an unencoded name should show the encoding, got %q", msg)
	}
}

func TestBadNames(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.do(t, "GET", "/api/locks/"+strings.Repeat("a", protocol.MaxNameLen+1)).wantError(t, 400)
	e.do(t, "GET", "/api/locks/%FF").wantError(t, 400)
	e.do(t, "GET", "/api/locks/").wantError(t, 404)
	e.do(t, "DELETE", "/api/locks/x/waiters/").wantError(t, 404)
}

func TestInfo(t *testing.T) {
	t.Parallel()
	info := adminhttp.Info{
		Version:   "v1.2.3",
		Started:   time.Now().Add(-time.Hour),
		Listen:    "127.0.0.1:7070",
		OpsListen: "127.0.0.1:9090",
		AuditLog:  "/var/log/monolock/audit.jsonl",
		ACLFile:   "/etc/monolock/acl.json",
		TLS:       true,
		MTLS:      true,
		IOTimeout: 5 * time.Second,
		Ready:     func(context.Context) error { return errors.New("the audit log is failing") },
	}
	e := startWith(t, info)
	e.holder(t, "x")
	e.waiter(t, "x")
	_, newest := e.holder(t, "y")

	var got struct {
		Version  string `json:"version"`
		UptimeMS int64  `json:"uptime_ms"`
		Config   struct {
			Listen      string `json:"listen"`
			OpsListen   string `json:"ops_listen"`
			TLS         bool   `json:"tls"`
			MTLS        bool   `json:"mtls"`
			ACLFile     string `json:"acl_file"`
			AuditLog    string `json:"audit_log"`
			IOTimeoutMS int64  `json:"io_timeout_ms"`
		} `json:"config"`
		Locks       int    `json:"locks"`
		Sessions    int    `json:"sessions"`
		Waiters     int    `json:"waiters"`
		Grants      uint64 `json:"grants"`
		Expiries    uint64 `json:"expiries"`
		NewestToken uint64 `json:"newest_token"`
		Ready       bool   `json:"ready"`
		NotReady    string `json:"not_ready"`
	}
	e.do(t, "GET", "/api/info").decode(t, 200, &got)
	if got.Version != "v1.2.3" || got.UptimeMS < time.Hour.Milliseconds() {
		t.Errorf("version %q uptime_ms %d, want v1.2.3 and at least an hour", got.Version, got.UptimeMS)
	}
	c := got.Config
	if c.Listen != info.Listen || c.OpsListen != info.OpsListen || !c.TLS || !c.MTLS ||
		c.ACLFile != info.ACLFile || c.AuditLog != info.AuditLog || c.IOTimeoutMS != 5000 {
		t.Errorf("config %+v does not reflect %+v", c, info)
	}
	if got.Locks != 2 || got.Sessions != 3 || got.Waiters != 1 {
		t.Errorf("locks %d sessions %d waiters %d, want 2, 3, 1", got.Locks, got.Sessions, got.Waiters)
	}
	if got.Grants != 2 || got.Expiries != 0 || got.NewestToken != newest {
		t.Errorf("grants %d expiries %d newest_token %d, want 2, 0, %d (the last token a client got)", got.Grants, got.Expiries, got.NewestToken, newest)
	}
	if got.Ready || got.NotReady != "the audit log is failing" {
		t.Errorf("ready %v not_ready %q, want false and Ready's error", got.Ready, got.NotReady)
	}

	var ready admin.ServerInfo
	start(t).do(t, "GET", "/api/info").decode(t, 200, &ready)
	if !ready.Ready || ready.NotReady != "" {
		t.Errorf("without Ready: ready %v not_ready %q, want true and \"\"", ready.Ready, ready.NotReady)
	}
}

// TestPages: limit= and after= walk the list a page at a time; total counts
// every match, next is the cursor, "" on the last page.
func TestPages(t *testing.T) {
	t.Parallel()
	e := start(t)
	for _, name := range []string{"c", "a", "b", "skip"} {
		e.holder(t, name)
	}
	var seen []string
	after := ""
	for range 3 {
		var page admin.LockList
		e.do(t, "GET", "/api/locks?match=%3F&limit=2&after="+url.QueryEscape(after)).decode(t, 200, &page)
		if page.Total != 3 {
			t.Errorf("total %d, want 3 (every lock the filter matched)", page.Total)
		}
		for _, l := range page.Locks {
			seen = append(seen, l.Name)
		}
		if after = page.Next; after == "" {
			break
		}
	}
	if !slices.Equal(seen, []string{"a", "b", "c"}) || after != "" {
		t.Errorf("pages listed %v, last next %q; want [a b c] and \"\"", seen, after)
	}
	for _, q := range []string{"limit=0", "limit=1001", "limit=x", "limit=-1", "limit=1&limit=2", "after=a&after=b"} {
		if msg := e.do(t, "GET", "/api/locks?"+q).wantError(t, 400); !strings.Contains(msg, strings.SplitN(q, "=", 2)[0]) {
			t.Errorf("?%s: error %q should name the parameter", q, msg)
		}
	}
}

func TestMethodNotAllowed(t *testing.T) {
	t.Parallel()
	e := start(t)
	for _, c := range []struct{ method, path, allow string }{
		{"POST", "/api/info", "GET, HEAD"},
		{"DELETE", "/api/locks", "GET, HEAD"},
		{"PUT", "/api/locks/x", "GET, HEAD"},
		{"POST", "/api/locks/a%2Fb", "GET, HEAD"},
		{"GET", "/api/locks/x/release", "POST"},
		{"DELETE", "/api/locks/x/release", "POST"},
		{"GET", "/api/locks/x/waiters/127.0.0.1:5", "DELETE"},
		{"POST", "/api/locks/x/waiters/127.0.0.1:5", "DELETE"},
	} {
		r := e.do(t, c.method, c.path)
		r.wantError(t, 405)
		if got := r.header.Get("Allow"); got != c.allow {
			t.Errorf("%s %s: Allow %q, want %q", c.method, c.path, got, c.allow)
		}
	}
}

func TestUnknownPath(t *testing.T) {
	t.Parallel()
	e := start(t)
	for _, path := range []string{"/api", "/api/", "/api/nope", "/metrics", "/api/info/x",
		"/api/locks/x/nope", "/api/locks/x/waiters", "/api/locks/x/waiters/a/b", "/API/locks"} {
		e.do(t, "GET", path).wantError(t, 404)
	}
}

// fake is a Backend that records what it was asked.
type fake struct {
	err      error
	locks    []admin.LockInfo // what Locks returns
	name     string
	addr     string
	operator string // of the last ForceRelease or KickWaiter
	deadline bool
	matched  bool // Locks was given a match function
	query    admin.LockQuery

	// With gate set, Locks reports that it entered and waits for gate.
	gate, entered chan struct{}
	inside        atomic.Int64
	mu            sync.Mutex
	maxInside     int64 // the most Locks calls in progress at once
}

func (f *fake) Locks(ctx context.Context, q admin.LockQuery) (admin.LockList, error) {
	if f.gate != nil {
		in := f.inside.Add(1)
		f.mu.Lock()
		f.maxInside = max(f.maxInside, in)
		f.mu.Unlock()
		f.entered <- struct{}{}
		<-f.gate
		f.inside.Add(-1)
		return admin.LockList{}, nil
	}
	_, f.deadline = ctx.Deadline()
	f.matched = q.Match != nil
	f.query = q
	locks := slices.Clone(f.locks)
	if q.Match != nil {
		locks = slices.DeleteFunc(locks, func(l admin.LockInfo) bool { return !q.Match(l.Name) })
	}
	slices.SortFunc(locks, func(a, b admin.LockInfo) int { return strings.Compare(a.Name, b.Name) }) // as the server does
	// Paging is the server's (eventloop's rule scripts test it); the fake
	// lists every match.
	return admin.LockList{Locks: locks, Total: len(locks)}, f.err
}

func (f *fake) Lock(ctx context.Context, name string) (admin.LockInfo, bool, error) {
	_, f.deadline = ctx.Deadline()
	f.name = name
	return admin.LockInfo{}, false, f.err
}

func (f *fake) ForceRelease(ctx context.Context, name, operator string) (uint64, bool, error) {
	f.name, f.operator = name, operator
	return 0, false, f.err
}

func (f *fake) KickWaiter(ctx context.Context, name, addr, operator string) (bool, error) {
	f.name, f.addr, f.operator = name, addr, operator
	return true, f.err
}

func (f *fake) Stats(ctx context.Context) (admin.Stats, error) {
	return admin.Stats{}, f.err
}

// TestRawPaths sends request targets as a client would write them, with no
// client-side normalisation, to every endpoint that takes a name, and checks
// what reaches the backend: each segment is decoded on its own, so an encoded
// '/' stays in the name and encoded dots are a name, not a path step.
func TestRawPaths(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, addr, want, wantAddr string }{
		{"a%2Fb", "%5B%3A%3A1%5D%3A4242", "a/b", "[::1]:4242"},
		{"a%2fb", "[::1]:4242", "a/b", "[::1]:4242"},
		{"nightly%2Fimport", "127.0.0.1:5", "nightly/import", "127.0.0.1:5"},
		{"%E6%97%A5%E6%9C%AC%2F%E8%AA%9E", "127.0.0.1:5", "日本/語", "127.0.0.1:5"},
		{"a%25b", "127.0.0.1:5", "a%b", "127.0.0.1:5"},
		{"%2E%2E", "127.0.0.1:5", "..", "127.0.0.1:5"},
		{"%2e", "127.0.0.1:5", ".", "127.0.0.1:5"},
		{"%2E%2E%2F%2E%2E%2Finfo", "127.0.0.1:5", "../../info", "127.0.0.1:5"},
		{"with%20space", "127.0.0.1:5", "with space", "127.0.0.1:5"},
	} {
		for _, m := range []struct{ method, target string }{
			{"GET", "/api/locks/" + c.name},
			{"HEAD", "/api/locks/" + c.name},
			{"POST", "/api/locks/" + c.name + "/release"},
			{"DELETE", "/api/locks/" + c.name + "/waiters/" + c.addr},
		} {
			f := &fake{}
			rec := httptest.NewRecorder()
			adminhttp.New(f, adminhttp.Info{}).ServeHTTP(rec, httptest.NewRequest(m.method, m.target, nil))
			want := http.StatusNotFound // the fake holds no lock
			if m.method == "DELETE" {
				want = http.StatusOK // and kicks any waiter
			}
			if rec.Code != want || f.name != c.want || (m.method == "DELETE" && f.addr != c.wantAddr) {
				t.Errorf("%s %s: status %d, backend saw name %q addr %q; want %d, %q, %q", m.method, m.target, rec.Code, f.name, f.addr, want, c.want, c.wantAddr)
			}
		}
	}
}

// TestUncleanPaths: ServeMux redirects a path with an empty, "." or ".."
// segment to its cleaned form. The API answers a JSON 404 instead and calls
// nothing: following the redirect would act on another lock than the one
// named (a 307 keeps the POST).
func TestUncleanPaths(t *testing.T) {
	t.Parallel()
	f := &fake{}
	api := httptest.NewServer(adminhttp.New(f, adminhttp.Info{}))
	defer api.Close()
	for _, c := range []struct{ method, path string }{
		{"GET", "/api/locks/.."},
		{"GET", "/api/locks/."},
		{"GET", "/api//locks"},
		{"GET", "/api/./info"},
		{"POST", "/api/locks/x/../y/release"},
		{"POST", "/api/locks/../locks/y/release"},
		{"DELETE", "/api/locks/x/waiters/../waiters/127.0.0.1:5"},
		{"GET", "/api/locks/a//b"},
	} {
		r := do(t, c.method, api.URL+c.path)
		msg := r.wantError(t, 404)
		if loc := r.header.Get("Location"); loc != "" {
			t.Errorf("%s %s: Location %q, want none", c.method, c.path, loc)
		}
		if !strings.Contains(msg, "%2E%2E") {
			t.Errorf("%s %s: error %q should say how to encode a name with dots", c.method, c.path, msg)
		}
	}
	if f.name != "" || f.addr != "" {
		t.Errorf("the backend was called for name %q addr %q; want no call for unclean paths", f.name, f.addr)
	}
}

// TestHugePathNotEchoed: a name or path far beyond any lock name is answered
// with a short error that says what the limit is, not echoed back whole.
func TestHugePathNotEchoed(t *testing.T) {
	t.Parallel()
	e := start(t)
	huge := strings.Repeat("n", 900<<10)
	for _, c := range []struct {
		method, path string
		status       int
		want         string
	}{
		{"GET", lockPath(huge), 400, "limit is 255"},
		{"POST", lockPath(huge) + "/release", 400, "limit is 255"},
		{"DELETE", lockPath(huge) + "/waiters/127.0.0.1:5", 400, "limit is 255"},
		{"DELETE", lockPath("idle") + "/waiters/" + huge, 404, "has no waiter at nnnn"},
		{"PUT", lockPath(huge), 405, "use GET or HEAD"},
		{"GET", "/api/nope/" + huge, 404, "no such endpoint /api/nope/nnnn"},
		{"GET", "/api/locks/" + huge + "/..", 404, "%2E%2E"},
	} {
		r := e.do(t, c.method, c.path)
		msg := r.wantError(t, c.status)
		if len(r.body) > 1024 {
			t.Errorf("%s of a %d-byte path: %d-byte answer, want the name cut short: %.200s…", c.method, len(c.path), len(r.body), r.body)
		}
		if !strings.Contains(msg, c.want) || !strings.Contains(msg, "…") {
			t.Errorf("%s of a %d-byte path: error %q, want it to contain %q and mark the cut with …", c.method, len(c.path), msg, c.want)
		}
	}

	// Just over the limit: the whole name is short enough to show, and the
	// error says the limit.
	msg := e.do(t, "GET", lockPath(strings.Repeat("a", protocol.MaxNameLen+1))).wantError(t, 400)
	if !strings.Contains(msg, "256 bytes, the limit is 255") {
		t.Errorf("error %q should give the name's length and the limit", msg)
	}
}

// TestMalformedEscapeInPath: a malformed percent-escape in the path is
// refused and reaches no backend. The handler never sees it: net/http
// answers it with its own plain-text 400 before routing, which no handler
// can turn into JSON.
func TestMalformedEscapeInPath(t *testing.T) {
	t.Parallel()
	f := &fake{}
	api := httptest.NewServer(adminhttp.New(f, adminhttp.Info{}))
	defer api.Close()
	for _, target := range []string{"/api/locks/%zz", "/api/locks/a%", "/api/locks/a%2/release"} {
		nc, err := net.DialTimeout("tcp", api.Listener.Addr().String(), safety)
		if err != nil {
			t.Fatal(err)
		}
		_ = nc.SetDeadline(time.Now().Add(safety))
		if _, err := io.WriteString(nc, "GET "+target+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(bufio.NewReader(nc), nil)
		if err != nil {
			t.Fatalf("GET %s: %v", target, err)
		}
		_ = res.Body.Close()
		_ = nc.Close()
		if res.StatusCode != 400 {
			t.Errorf("GET %s: status %d, want 400", target, res.StatusCode)
		}
	}
	if f.name != "" {
		t.Errorf("the backend saw %q", f.name)
	}
}

func TestBackendFailure(t *testing.T) {
	t.Parallel()
	f := &fake{err: errors.New("run on event loop: engine stopped")}
	api := httptest.NewServer(adminhttp.New(f, adminhttp.Info{}))
	defer api.Close()
	for _, c := range []struct{ method, path string }{
		{"GET", "/api/info"},
		{"GET", "/api/locks"},
		{"GET", "/api/locks/x"},
		{"POST", "/api/locks/x/release"},
		{"DELETE", "/api/locks/x/waiters/127.0.0.1:5"},
	} {
		msg := do(t, c.method, api.URL+c.path).wantError(t, 503)
		if !strings.Contains(msg, "retry") {
			t.Errorf("%s %s: error %q should say what to do", c.method, c.path, msg)
		}
	}
	f.err = nil
	do(t, "GET", api.URL+"/api/locks/x").wantError(t, 404)
	if !f.deadline {
		t.Error("the backend call had no deadline")
	}
}

// TestListFiltersInHandler: the handler hands the backend the compiled
// pattern as a function (the backend runs it off its event loop) and sorts
// what comes back, in whatever order.
func TestListFiltersInHandler(t *testing.T) {
	t.Parallel()
	var snapshot []admin.LockInfo
	for _, name := range []string{"nightly/import", "deploy", "nightly", "nightly/export/eu", "aaaa", "nightly/a/b"} {
		snapshot = append(snapshot, admin.LockInfo{Name: name, Waiters: []admin.WaiterInfo{}})
	}
	f := &fake{locks: snapshot}
	api := httptest.NewServer(adminhttp.New(f, adminhttp.Info{}))
	defer api.Close()
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"", []string{"aaaa", "deploy", "nightly", "nightly/a/b", "nightly/export/eu", "nightly/import"}},
		{"?match=" + url.QueryEscape("nightly/*"), []string{"nightly/a/b", "nightly/export/eu", "nightly/import"}},
		{"?match=" + url.QueryEscape("*a*b"), []string{"nightly/a/b"}},
		{"?match=" + url.QueryEscape("?????"), nil},
		{"?match=deploy", []string{"deploy"}},
	} {
		var got admin.LockList
		do(t, "GET", api.URL+"/api/locks"+c.query).decode(t, 200, &got)
		var names []string
		for _, l := range got.Locks {
			names = append(names, l.Name)
		}
		if !slices.Equal(names, c.want) {
			t.Errorf("GET /api/locks%s: %q, want %q", c.query, names, c.want)
		}
		if f.matched != (c.query != "") {
			t.Errorf("GET /api/locks%s: backend given a match function: %v", c.query, f.matched)
		}
	}
	if !f.deadline {
		t.Error("the backend call had no deadline")
	}
}

// TestMalformedQuery: a query that does not decode is a 400, not a list of
// every lock with the filter silently dropped.
func TestMalformedQuery(t *testing.T) {
	t.Parallel()
	f := &fake{locks: []admin.LockInfo{{Name: "a"}, {Name: "b"}}}
	api := httptest.NewServer(adminhttp.New(f, adminhttp.Info{}))
	defer api.Close()
	for _, q := range []string{"match=%zz", "match=a%", "x=%zz&match=a", "match=a&match=b"} {
		msg := do(t, "GET", api.URL+"/api/locks?"+q).wantError(t, 400)
		if !strings.Contains(msg, "match") {
			t.Errorf("?%s: error %q should name the match parameter", q, msg)
		}
	}
}

// TestMatchBudget: a pattern is charged its worst case on every name it is
// tried on; the request whose charges pass MatchBudget is a 400 that says
// what to change, one name short of it is served.
//
// The names match at the pattern's first try, so that the work actually
// done is a sliver of what is charged: the charge is the worst case, not
// the work, and the test does not spend the budget's worth of CPU (seconds
// under -race on a loaded machine) to show it.
func TestMatchBudget(t *testing.T) {
	t.Parallel()
	const pattern = "*" + "????????????????????????????????????????????????????????????????????????????????????????????????????" + "b*"
	prefix := strings.Repeat("a", 100) + "b" + strings.Repeat("a", protocol.MaxNameLen-6-101) // then six digits
	per := glob.MustCompile(pattern).Cost(protocol.MaxNameLen)
	fits := adminhttp.MatchBudget / per
	for _, c := range []struct {
		names  int
		status int
	}{{fits, 200}, {fits + 1, 400}} {
		var locks []admin.LockInfo
		for i := range c.names {
			locks = append(locks, admin.LockInfo{Name: fmt.Sprintf("%s%06d", prefix, i), Waiters: []admin.WaiterInfo{}})
		}
		api := httptest.NewServer(adminhttp.New(&fake{locks: locks}, adminhttp.Info{}))
		r := do(t, "GET", api.URL+"/api/locks?match="+url.QueryEscape(pattern))
		api.Close()
		if c.status == 200 {
			var got admin.LockList
			r.decode(t, 200, &got)
			if len(got.Locks) != c.names {
				t.Fatalf("%d names within the budget: %d matched, want every one", c.names, len(got.Locks))
			}
			continue
		}
		msg := r.wantError(t, c.status)
		for _, want := range []string{"too costly", fmt.Sprint(c.names, " held locks"), "'?'", "prefix"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%d names: error %q should say %q", c.names, msg, want)
			}
		}
	}
	// An ordinary filter over as many names is nowhere near the budget.
	var locks []admin.LockInfo
	for i := range 20 * fits {
		locks = append(locks, admin.LockInfo{Name: fmt.Sprintf("%s%06d", prefix, i), Waiters: []admin.WaiterInfo{}})
	}
	api := httptest.NewServer(adminhttp.New(&fake{locks: locks}, adminhttp.Info{}))
	defer api.Close()
	var got admin.LockList
	do(t, "GET", api.URL+"/api/locks?match="+url.QueryEscape("*000001")).decode(t, 200, &got)
	if len(got.Locks) != 1 {
		t.Fatalf("*000001 matched %d locks, want 1", len(got.Locks))
	}
}

// TestListingsTakeTurns: at most half the cores' worth of listings run at
// once; the others wait for a turn and are then served.
func TestListingsTakeTurns(t *testing.T) {
	t.Parallel()
	limit := max(1, runtime.GOMAXPROCS(0)/2)
	f := &fake{gate: make(chan struct{}), entered: make(chan struct{}, 16)}
	api := httptest.NewServer(adminhttp.New(f, adminhttp.Info{}))
	defer api.Close()
	done := make(chan int, limit+2)
	for range limit + 2 {
		go func() {
			resp, err := http.Get(api.URL + "/api/locks")
			if err != nil {
				done <- 0
				return
			}
			_ = resp.Body.Close()
			done <- resp.StatusCode
		}()
	}
	for range limit + 2 {
		<-f.entered // one more listing in progress
		f.mu.Lock()
		most := f.maxInside
		f.mu.Unlock()
		if most > int64(limit) {
			t.Fatalf("%d listings ran at once; at most %d may", most, limit)
		}
		f.gate <- struct{}{}
	}
	for range limit + 2 {
		if code := <-done; code != 200 {
			t.Fatalf("a listing that waited its turn: status %d", code)
		}
	}
}
