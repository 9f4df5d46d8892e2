package hostcheck_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/monolock/monolock/internal/hostcheck"
)

const setting = "-http-allowed-hosts or MONOLOCK_HTTP_ALLOWED_HOSTS"

func TestAllows(t *testing.T) {
	r := hostcheck.New([]string{"monolock.prod.svc", "Tunnel.Example."}, setting)
	for _, c := range []struct {
		host string
		want bool
	}{
		// IP literals: rebinding needs a name.
		{"127.0.0.1", true},
		{"127.0.0.1:7071", true},
		{"10.1.2.3:9090", true},
		{"[::1]:7071", true},
		{"[::1]", true},
		{"::1", true},
		{"[fe80::1%25eth0]:7071", true},
		// localhost, in any case, with a trailing dot.
		{"localhost", true},
		{"localhost:7071", true},
		{"LOCALHOST.", true},
		{"LocalHost.:7071", true},
		// Listed names, compared without case and trailing dot.
		{"monolock.prod.svc", true},
		{"MONOLOCK.prod.svc.:7071", true},
		{"tunnel.example:443", true},
		// No Host at all (HTTP/1.0): no browser sent it.
		{"", true},
		// Names not listed, and what only looks like an address.
		{"attacker.example", false},
		{"attacker.example:7071", false},
		{"127.0.0.1.nip.io:7071", false},
		{"localhost.attacker.example", false},
		{"sub.monolock.prod.svc", false},
		{"127.1", false},
		{"[attacker.example]:7071", false},
	} {
		if got := r.Allows(c.host); got != c.want {
			t.Errorf("Allows(%q) = %v, want %v", c.host, got, c.want)
		}
	}
	if hostcheck.New(nil, setting).Allows("monolock.prod.svc") {
		t.Error("a rule without names answers a name")
	}
}

func TestRefusalNamesTheSetting(t *testing.T) {
	r := hostcheck.New(nil, setting)
	msg := r.Refusal("attacker.example:7071")
	for _, want := range []string{`"attacker.example:7071"`, "DNS rebinding", "127.0.0.1:7071", "localhost:7071", setting} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal %q does not say %q", msg, want)
		}
	}
	if long := r.Refusal(strings.Repeat("a", 5000) + ".example"); len(long) > 1000 {
		t.Errorf("the refusal of a 5,000-byte Host is %d bytes: it must not repeat all of it", len(long))
	}
}

func TestParseNames(t *testing.T) {
	got, err := hostcheck.ParseNames(" monolock.prod.svc , Tunnel.Example.,,")
	if err != nil || strings.Join(got, ",") != "monolock.prod.svc,tunnel.example" {
		t.Fatalf("ParseNames = %q, %v", got, err)
	}
	if got, err := hostcheck.ParseNames(""); err != nil || len(got) != 0 {
		t.Fatalf("ParseNames of nothing = %q, %v", got, err)
	}
	for in, want := range map[string]string{
		"https://monolock.example.com": "without a scheme",
		"monolock.example.com:7071":    "without a port",
		"monolock.example.com/admin":   "without a port or a path",
		"*.example.com":                "wildcards",
		"a b":                          "contains",
		strings.Repeat("a", 254):       "at most 253",
	} {
		if _, err := hostcheck.ParseNames("ok.example," + in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseNames(%q): %v, want an error saying %q", in, err, want)
		}
	}
}

func TestGuard(t *testing.T) {
	served := 0
	next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served++ })
	g := hostcheck.New(nil, setting).Guard(next, hostcheck.PlainText)
	for host, want := range map[string]int{"attacker.example:9090": 421, "127.0.0.1:9090": 200} {
		req := httptest.NewRequest("GET", "/metrics", nil)
		req.Host = host
		rec := httptest.NewRecorder()
		g.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("Host %s: %d, want %d", host, rec.Code, want)
		}
	}
	if served != 1 {
		t.Errorf("the guarded handler ran %d times, want once (for the address only)", served)
	}
	var none *hostcheck.Rule
	req := httptest.NewRequest("GET", "/metrics", nil)
	req.Host = "attacker.example"
	none.Guard(next, hostcheck.PlainText).ServeHTTP(httptest.NewRecorder(), req)
	if served != 2 {
		t.Error("a nil rule refused a Host")
	}
}
