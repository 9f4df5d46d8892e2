package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/monolock/monolock/internal/certs/certstest"
	"github.com/monolock/monolock/internal/testsupport/wire"
	"github.com/monolock/monolock/protocol"
)

// withHost makes one request to addr with the Host header host, as a
// browser sends it for a page's own fetch (same-origin); PORT in host is
// addr's port.
func withHost(t *testing.T, hc *http.Client, scheme, method, addr, path, host string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, scheme+"://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(addr)
	req.Host = strings.ReplaceAll(host, "PORT", port)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestHTTPPortsRefuseRebinding: on the real binary, the admin port without
// mutual TLS and the ops port refuse a name they do not list in Host with
// 421 naming -http-allowed-hosts, and nothing happens (the holder keeps its
// lock); they answer IP literals, localhost and the names listed.
func TestHTTPPortsRefuseRebinding(t *testing.T) {
	p := startServer(t, "-ops-listen", "127.0.0.1:0", "-admin-listen", "127.0.0.1:0", "-http-allowed-hosts", "console.test,Monolock.Prod.Svc.")
	holder := wire.MustDial(t, p.Addr, wire.Options{})
	holder.SendAcquire("deploy/prod", testLease)
	granted, err := holder.ReadErr(safety)
	if err != nil || granted.Type != protocol.TypeAcquired {
		t.Fatalf("holder: %+v %v", granted, err)
	}
	hc := &http.Client{Timeout: safety}
	for _, c := range []struct{ method, addr, path string }{
		{"POST", p.AdminAddr, "/api/locks/deploy%2Fprod/release"},
		{"GET", p.AdminAddr, "/api/locks"},
		{"GET", p.AdminAddr, "/"},
		{"GET", p.OpsAddr, "/metrics"},
		{"GET", p.OpsAddr, "/readyz"},
	} {
		for _, host := range []string{"attacker.example:PORT", "attacker.example", "sub.console.test:PORT"} {
			code, body := withHost(t, hc, "http", c.method, c.addr, c.path, host)
			if code != http.StatusMisdirectedRequest || !strings.Contains(body, "-http-allowed-hosts or MONOLOCK_HTTP_ALLOWED_HOSTS") {
				t.Errorf("%s %s with Host %s: %d %s; want 421 naming -http-allowed-hosts", c.method, c.path, host, code, body)
			}
		}
		if c.method == "POST" {
			continue
		}
		for _, host := range []string{"127.0.0.1:PORT", "localhost:PORT", "LOCALHOST.", "console.test:PORT", "monolock.prod.svc"} {
			if code, body := withHost(t, hc, "http", c.method, c.addr, c.path, host); code != http.StatusOK {
				t.Errorf("%s %s with Host %s: %d %s; want 200", c.method, c.path, host, code, body)
			}
		}
	}
	holder.SendHeartbeat()
	if f, err := holder.ReadErr(safety); err != nil || f.Type != protocol.TypeAcquired || f.Token != granted.Token {
		t.Fatalf("the holder after the refused release: %+v %v; want ACQUIRED %d", f, err, granted.Token)
	}
}

// TestMutualTLSAdminAnswersAnyHost: an admin port with mutual TLS has no
// Host rule (a rebinding page has no operator certificate): an operator
// reaching it by a name it does not list is answered, while the ops port of
// the same server still refuses that name.
func TestMutualTLSAdminAnswersAnyHost(t *testing.T) {
	dir, pki, _ := labFiles(t)
	adminACL := filepath.Join(dir, "admin-acl.json")
	writeFile(t, adminACL, operatorRules)
	p := startServer(t, append([]string{"-ops-listen", "127.0.0.1:0"}, adminTLSArgs(pki, adminACL)...)...)
	op := newOperator(pki, p.AdminAddr, certstest.ClientURI)
	if code, body := withHost(t, op.http, "https", "GET", p.AdminAddr, "/api/info", "monolock-admin.prod.example:PORT"); code != http.StatusOK {
		t.Fatalf("GET /api/info under mutual TLS with Host monolock-admin.prod.example: %d %s; want 200", code, body)
	}
	if code, _ := withHost(t, &http.Client{Timeout: safety}, "http", "GET", p.OpsAddr, "/metrics", "monolock-admin.prod.example:PORT"); code != http.StatusMisdirectedRequest {
		t.Fatalf("GET /metrics with Host monolock-admin.prod.example: %d; want 421", code)
	}
}

// TestAllowedHostsSetting: -http-allowed-hosts and its environment variable
// take a comma-separated list of bare names; anything else is refused
// saying what to give.
func TestAllowedHostsSetting(t *testing.T) {
	s, err := parseSettings(nil, env(map[string]string{"MONOLOCK_HTTP_ALLOWED_HOSTS": "console.test, Monolock.Prod.Svc."}), &bytes.Buffer{})
	if err != nil || strings.Join(s.httpAllowedHosts, ",") != "console.test,monolock.prod.svc" {
		t.Fatalf("MONOLOCK_HTTP_ALLOWED_HOSTS: %q, %v", s.httpAllowedHosts, err)
	}
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"-http-allowed-hosts", "console.test:7071"}, nil, `invalid -http-allowed-hosts: "console.test:7071" is not a host name: give the name alone, without a port`},
		{nil, map[string]string{"MONOLOCK_HTTP_ALLOWED_HOSTS": "https://console.test"}, "invalid MONOLOCK_HTTP_ALLOWED_HOSTS: \"https://console.test\" is not a host name: give the name alone, without a scheme"},
	} {
		if _, err := parseSettings(c.args, env(c.env), &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %v: %v; want %q", c.args, c.env, err, c.want)
		}
	}
}

// TestStartPrintsTheConsoleURL: a server with an admin port says where its
// console is, at an address the Host rule answers: the console is there.
func TestStartPrintsTheConsoleURL(t *testing.T) {
	p := startServer(t, "-admin-listen", "127.0.0.1:0")
	line := p.MustWaitLog(t, "open the admin console at")
	u, _ := line["console"].(string)
	if u != "http://"+p.AdminAddr+"/" {
		t.Fatalf("the console line names %q, want http://%s/", u, p.AdminAddr)
	}
	if code, body := get(t, u); code != http.StatusOK || !strings.Contains(body, "<html") {
		t.Fatalf("GET %s: %d %.200s", u, code, body)
	}
}

func TestConsoleURL(t *testing.T) {
	for _, c := range []struct {
		bound string
		https bool
		want  string
	}{
		{"127.0.0.1:7071", false, "http://127.0.0.1:7071/"},
		{"0.0.0.0:7071", true, "https://127.0.0.1:7071/"},
		{"[::]:7071", false, "http://[::1]:7071/"},
		{"[::1]:7071", false, "http://[::1]:7071/"},
		{"10.0.0.5:7071", true, "https://10.0.0.5:7071/"},
	} {
		if got := consoleURL(c.bound, c.https); got != c.want {
			t.Errorf("consoleURL(%q, %v) = %q, want %q", c.bound, c.https, got, c.want)
		}
	}
}
