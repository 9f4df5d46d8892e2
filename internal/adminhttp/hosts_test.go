package adminhttp_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/monolock/monolock/internal/adminhttp"
	"github.com/monolock/monolock/internal/hostcheck"
	"github.com/monolock/monolock/protocol/admin"
)

// everyRoute is one request to each route of the admin port, as a page
// of attacker.example rebound to this port would send it: same-origin to
// the browser.
var everyRoute = []struct{ method, target string }{
	{"GET", "/"},
	{"GET", "/console/console.js"},
	{"GET", "/api/whoami"},
	{"GET", "/api/info"},
	{"GET", "/api/locks"},
	{"GET", "/api/locks?limit=50"},
	{"GET", "/api/locks/deploy%2Fprod"},
	{"POST", "/api/locks/deploy%2Fprod/release"},
	{"DELETE", "/api/locks/deploy%2Fprod/waiters/127.0.0.1:5"},
	{"GET", "/no/such/route"},
}

func rebound(method, target, host string) *http.Request {
	r := httptest.NewRequest(method, target, nil)
	r.Host = host
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	return r
}

// TestHostRule: an admin port with a Host rule refuses a name it does not
// list on every route, with 421 and a JSON error naming the setting, before
// anything reaches the server; it answers IP literals, localhost and listed
// names.
func TestHostRule(t *testing.T) {
	t.Parallel()
	rule := hostcheck.New([]string{"console.example"}, "-http-allowed-hosts or MONOLOCK_HTTP_ALLOWED_HOSTS")
	for _, route := range everyRoute {
		f := &fake{}
		h := adminhttp.New(f, adminhttp.Info{Hosts: rule})
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, rebound(route.method, route.target, "attacker.example:7071"))
		var e admin.ErrorResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &e); rec.Code != http.StatusMisdirectedRequest || err != nil ||
			!strings.Contains(e.Error, "-http-allowed-hosts") || !strings.Contains(e.Error, "attacker.example:7071") {
			t.Errorf("%s %s with Host attacker.example:7071: %d %s, want 421 with a JSON error naming the Host and -http-allowed-hosts", route.method, route.target, rec.Code, rec.Body)
		}
		if rec.Header().Get("Content-Security-Policy") == "" {
			t.Errorf("%s %s: the 421 lacks the security headers", route.method, route.target)
		}
		if f.name != "" || f.matched {
			t.Errorf("%s %s with Host attacker.example:7071 reached the server (lock %q)", route.method, route.target, f.name)
		}
	}
	for _, host := range []string{"127.0.0.1:7071", "[::1]:7071", "localhost:7071", "LOCALHOST.", "console.example", "Console.Example.:443"} {
		rec := httptest.NewRecorder()
		adminhttp.New(&fake{}, adminhttp.Info{Hosts: rule}).ServeHTTP(rec, rebound("GET", "/api/info", host))
		if rec.Code != http.StatusOK {
			t.Errorf("GET /api/info with Host %s: %d %s, want 200", host, rec.Code, rec.Body)
		}
	}
}

// TestNoHostRuleUnderMutualTLS: an admin port without a Host rule (mutual
// TLS: a rebinding page has no operator certificate) answers any Host.
func TestNoHostRuleUnderMutualTLS(t *testing.T) {
	t.Parallel()
	access := adminhttp.CertAccess(mustAdminRules(t, `{"rules": [{"identity": "spiffe://prod/oncall/*", "roles": ["read", "release", "kick"]}]}`))
	h := adminhttp.New(&fake{}, adminhttp.Info{Access: access})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, asCaller(rebound("GET", "/api/info", "monolock-admin.prod.example:7071"), "spiffe://prod/oncall/ana"))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /api/info under mutual TLS with Host monolock-admin.prod.example: %d %s, want 200", rec.Code, rec.Body)
	}
}
