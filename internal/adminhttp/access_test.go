package adminhttp_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/monolock/monolock/internal/acl"
	"github.com/monolock/monolock/internal/adminhttp"
	"github.com/monolock/monolock/protocol/admin"
)

const adminRules = `{"rules": [
  {"identity": "spiffe://prod/oncall/*", "roles": ["read", "release", "kick"]},
  {"identity": "dashboard.prod", "roles": ["read"]},
  {"identity": "janitor.prod", "roles": ["kick"]}
]}`

// countRefusals records AdminRefused by role.
type countRefusals struct {
	mu sync.Mutex
	by map[string]int
}

func (c *countRefusals) AdminRefused(role string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.by[role]++
}

// asCaller makes r come over mutual TLS from a verified certificate whose
// URI SAN (or, for a name without "://", Common Name) is identity; "" is a
// certificate naming nobody.
func asCaller(r *http.Request, identity string) *http.Request {
	cert := &x509.Certificate{}
	if u, err := url.Parse(identity); err == nil && u.Scheme != "" {
		cert.URIs = []*url.URL{u}
	} else {
		cert.Subject.CommonName = identity
	}
	r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}, VerifiedChains: [][]*x509.Certificate{{cert}}}
	return r
}

func mustAdminRules(t *testing.T, s string) *acl.AdminRules {
	t.Helper()
	r, err := acl.ParseAdmin([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRoles: under mutual TLS each endpoint needs its role; a caller without
// it gets 403 naming the role and how to grant it, the refusal is counted by
// role, and the backend is never called. /api/whoami needs no role.
func TestRoles(t *testing.T) {
	t.Parallel()
	refusals := &countRefusals{by: map[string]int{}}
	f := &fake{}
	h := adminhttp.New(f, adminhttp.Info{Access: adminhttp.CertAccess(mustAdminRules(t, adminRules)), Refusals: refusals})
	endpoints := []struct{ method, target, role string }{
		{"GET", "/api/info", "read"},
		{"GET", "/api/locks", "read"},
		{"HEAD", "/api/locks", "read"},
		{"GET", "/api/locks/x", "read"},
		{"POST", "/api/locks/x/release", "release"},
		{"DELETE", "/api/locks/x/waiters/127.0.0.1:5", "kick"},
		{"GET", "/api/whoami", ""},
	}
	callers := map[string]string{ // identity → its roles
		"spiffe://prod/oncall/ana": "read release kick",
		"dashboard.prod":           "read",
		"janitor.prod":             "kick",
		"spiffe://prod/batch/7":    "",
		"":                         "",
	}
	want := map[string]int{}
	for identity, roles := range callers {
		for _, e := range endpoints {
			*f = fake{}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, asCaller(httptest.NewRequest(e.method, e.target, nil), identity))
			allowed := e.role == "" || strings.Contains(" "+roles+" ", " "+e.role+" ")
			if !allowed {
				want[e.role]++
				var er admin.ErrorResponse
				if rec.Code != http.StatusForbidden || (e.method != "HEAD" && (json.Unmarshal(rec.Body.Bytes(), &er) != nil ||
					!strings.Contains(er.Error, `needs the admin role "`+e.role+`"`) || !strings.Contains(er.Error, "-admin-acl-file"))) {
					t.Errorf("%q %s %s: %d %s; want 403 naming role %q and -admin-acl-file", identity, e.method, e.target, rec.Code, rec.Body, e.role)
				}
				if f.name != "" || f.deadline {
					t.Errorf("%q %s %s: refused, but the backend was called", identity, e.method, e.target)
				}
				continue
			}
			if rec.Code == http.StatusForbidden {
				t.Errorf("%q %s %s: 403 %s; the caller has %q", identity, e.method, e.target, rec.Body, roles)
			}
		}
	}
	for _, role := range []string{"read", "release", "kick"} {
		if refusals.by[role] != want[role] {
			t.Errorf("refusals of %q counted %d, want %d", role, refusals.by[role], want[role])
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, asCaller(httptest.NewRequest("POST", "/api/locks/x/release", nil), "dashboard.prod"))
	if body := rec.Body.String(); !strings.Contains(body, `has only read`) || !strings.Contains(body, `{\"identity\": \"dashboard.prod\", \"roles\": [\"release\"]}`) {
		t.Errorf("403 body %s; want what the caller has and the rule that grants the role", body)
	}
}

func whoami(t *testing.T, h http.Handler, r *http.Request) admin.WhoAmI {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	var got admin.WhoAmI
	response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}.decode(t, 200, &got)
	if got.Roles == nil {
		t.Fatalf("whoami %s: roles is null, want a list", rec.Body)
	}
	return got
}

func TestWhoAmI(t *testing.T) {
	t.Parallel()
	open := adminhttp.New(&fake{}, adminhttp.Info{})
	if got := whoami(t, open, httptest.NewRequest("GET", "/api/whoami", nil)); got.Identity != "" || strings.Join(got.Roles, ",") != "read,release,kick" {
		t.Errorf("without mutual TLS: %+v, want no identity and every role", got)
	}
	access := adminhttp.CertAccess(mustAdminRules(t, adminRules))
	h := adminhttp.New(&fake{}, adminhttp.Info{Access: access})
	for identity, roles := range map[string]string{
		"spiffe://prod/oncall/ana": "read,release,kick",
		"janitor.prod":             "kick",
		"spiffe://prod/batch/7":    "",
	} {
		if got := whoami(t, h, asCaller(httptest.NewRequest("GET", "/api/whoami", nil), identity)); got.Identity != identity || strings.Join(got.Roles, ",") != roles {
			t.Errorf("%s: %+v, want roles %q", identity, got, roles)
		}
	}
	// A request without TLS state on a mutual-TLS API has no identity and
	// no role (the listener never lets one through; the handler does not
	// rely on it).
	if got := whoami(t, h, httptest.NewRequest("GET", "/api/whoami", nil)); got.Identity != "" || len(got.Roles) != 0 {
		t.Errorf("no TLS state: %+v, want nothing", got)
	}
	// SIGHUP's new rules apply to the next call.
	access.SetRules(mustAdminRules(t, `{"rules": [{"identity": "janitor.prod", "roles": ["read", "kick"]}]}`))
	if got := whoami(t, h, asCaller(httptest.NewRequest("GET", "/api/whoami", nil), "janitor.prod")); strings.Join(got.Roles, ",") != "read,kick" {
		t.Errorf("after SetRules: %+v, want read,kick", got)
	}
	if got := whoami(t, h, asCaller(httptest.NewRequest("GET", "/api/whoami", nil), "spiffe://prod/oncall/ana")); len(got.Roles) != 0 {
		t.Errorf("after SetRules dropped its rule: %+v, want no role", got)
	}
}

// TestOperatorReachesTheBackend: force-release and kick pass the caller's
// identity on, for the audit log; without mutual TLS it is "".
func TestOperatorReachesTheBackend(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		access   *adminhttp.Access
		identity string
	}{
		{adminhttp.CertAccess(mustAdminRules(t, adminRules)), "spiffe://prod/oncall/ana"},
		{adminhttp.OpenAccess(), ""},
	} {
		for _, target := range []string{"/api/locks/x/release", "/api/locks/x/waiters/127.0.0.1:5"} {
			method := map[bool]string{true: "POST", false: "DELETE"}[strings.HasSuffix(target, "/release")]
			f := &fake{operator: "unset"}
			rec := httptest.NewRecorder()
			adminhttp.New(f, adminhttp.Info{Access: c.access}).ServeHTTP(rec, asCaller(httptest.NewRequest(method, target, nil), "spiffe://prod/oncall/ana"))
			if f.operator != c.identity {
				t.Errorf("%s %s: the backend got operator %q, want %q", method, target, f.operator, c.identity)
			}
		}
	}
}

// TestRefusalsAreLoggedSampled: a caller refused in a loop gets a log line
// for the first ones only; the metric counts every refusal.
func TestRefusalsAreLoggedSampled(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer // ServeHTTP runs on this goroutine
	refusals := &countRefusals{by: map[string]int{}}
	h := adminhttp.New(&fake{}, adminhttp.Info{Access: adminhttp.CertAccess(mustAdminRules(t, adminRules)), Refusals: refusals, Log: zerolog.New(&logs)})
	const calls = 200
	for range calls {
		h.ServeHTTP(httptest.NewRecorder(), asCaller(httptest.NewRequest("POST", "/api/locks/x/release", nil), "dashboard.prod"))
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	var first map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil || first["role"] != "release" || first["identity"] != "dashboard.prod" || first["level"] != "warn" {
		t.Errorf("first log line %s (%v); want a warning naming the identity and the role", lines[0], err)
	}
	// The burst is 10 a second; 200 in-process calls take far less than the
	// 19 s that could log 190 of them.
	if len(lines) < 10 || len(lines) >= calls {
		t.Errorf("%d refusals logged %d lines; want the burst of 10 and far fewer than every one", calls, len(lines))
	}
	if refusals.by["release"] != calls {
		t.Errorf("metric counted %d refusals, want %d", refusals.by["release"], calls)
	}
}
