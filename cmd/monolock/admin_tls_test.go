package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monolock/monolock/internal/certs/certstest"
	"github.com/monolock/monolock/internal/opshttp"
	"github.com/monolock/monolock/internal/testsupport/wire"
	"github.com/monolock/monolock/protocol"
	"github.com/monolock/monolock/protocol/admin"
)

// operatorRules grants the lab's URI identity read and release, and the DNS
// one read only; nobody may kick until the test reloads them.
const operatorRules = `{"rules": [
  {"identity": "spiffe://lab/worker/*", "roles": ["read", "release"]},
  {"identity": "worker.dns.local", "roles": ["read"]}
]}`

// adminTLSArgs are the flags of an admin port with mutual TLS and the
// admin ACL at aclPath, sharing the lab's server certificate.
func adminTLSArgs(pki *certstest.PKI, aclPath string) []string {
	return []string{"-admin-listen", "127.0.0.1:0", "-admin-tls-cert", pki.Server.Cert, "-admin-tls-key", pki.Server.Key,
		"-admin-tls-client-ca", pki.CA, "-admin-acl-file", aclPath}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// operator is an HTTPS client of the admin API with one client certificate
// (or none, or an untrusted one).
type operator struct {
	base string
	http *http.Client
}

func newOperator(pki *certstest.PKI, addr, who string) *operator {
	return &operator{base: "https://" + addr, http: &http.Client{Timeout: safety, Transport: &http.Transport{TLSClientConfig: pki.ClientTLS(who)}}}
}

// do makes one request; err is a failure to get an answer.
func (o *operator) do(method, path string) (int, string, error) {
	req, err := http.NewRequest(method, o.base+path, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := o.http.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

func (o *operator) must(t *testing.T, method, path string, want int) string {
	t.Helper()
	code, body, err := o.do(method, path)
	if err != nil || code != want {
		t.Fatalf("%s %s: %d %s (%v); want %d", method, path, code, body, err, want)
	}
	return body
}

func (o *operator) whoami(t *testing.T) admin.WhoAmI {
	t.Helper()
	var w admin.WhoAmI
	if err := json.Unmarshal([]byte(o.must(t, "GET", "/api/whoami", 200)), &w); err != nil {
		t.Fatal(err)
	}
	return w
}

// TestAdminMutualTLS drives the admin port of the real binary over mutual
// TLS: each operator certificate has the roles the admin ACL grants it, a
// call without the role is refused with 403 (logged, counted) and changes
// nothing, the audit log names the operator of a force-release and a kick,
// and SIGHUP reloads both the admin ACL and the certificate.
func TestAdminMutualTLS(t *testing.T) {
	dir, pki, _ := labFiles(t)
	adminACL := filepath.Join(dir, "admin-acl.json")
	writeFile(t, adminACL, operatorRules)
	auditPath := filepath.Join(dir, "audit.jsonl")
	p := startServer(t, append(adminTLSArgs(pki, adminACL), "-ops-listen", "127.0.0.1:0", "-audit-log", auditPath)...)
	if p.Started["admin_tls"] != true || p.Started["admin_mtls"] != true || p.Started["admin_acl_file"] != adminACL {
		t.Errorf("start line %v; want admin_tls, admin_mtls and admin_acl_file", p.Started)
	}
	ana := newOperator(pki, p.AdminAddr, certstest.ClientURI)
	dashboard := newOperator(pki, p.AdminAddr, certstest.ClientDNS)

	if w := ana.whoami(t); w.Identity != certstest.IdentityURI || strings.Join(w.Roles, ",") != "read,release" {
		t.Errorf("whoami: %+v; want %s with read,release", w, certstest.IdentityURI)
	}
	if w := dashboard.whoami(t); w.Identity != certstest.IdentityDNS || strings.Join(w.Roles, ",") != "read" {
		t.Errorf("whoami: %+v; want %s with read", w, certstest.IdentityDNS)
	}
	if w := newOperator(pki, p.AdminAddr, certstest.ClientCN).whoami(t); w.Identity != certstest.IdentityCN || len(w.Roles) != 0 {
		t.Errorf("whoami of an identity no rule names: %+v; want no role", w)
	}
	newOperator(pki, p.AdminAddr, certstest.ClientCN).must(t, "GET", "/api/locks", 403)
	if line := p.MustWaitLog(t, "admin call refused"); line["role"] != "read" || line["identity"] != certstest.IdentityCN || line["path"] != "/api/locks" {
		t.Errorf("refusal log line %v; want the identity, the role and the path", line)
	}

	holder := wire.MustDial(t, p.Addr, wire.Options{})
	holder.SendAcquire("deploy", testLease)
	granted, err := holder.ReadErr(safety)
	if err != nil || granted.Type != protocol.TypeAcquired {
		t.Fatalf("holder: %+v %v", granted, err)
	}
	waiter := wire.MustDial(t, p.Addr, wire.Options{})
	waiter.SendAcquire("deploy", testLease)
	if f, err := waiter.ReadErr(safety); err != nil || f.Type != protocol.TypeWaiting {
		t.Fatalf("waiter: %+v %v", f, err)
	}
	dashboard.must(t, "GET", "/api/locks/deploy", 200)

	// Read-only: the force-release is refused, and the holder keeps its lock.
	var refused admin.ErrorResponse
	if err := json.Unmarshal([]byte(dashboard.must(t, "POST", "/api/locks/deploy/release", 403)), &refused); err != nil ||
		!strings.Contains(refused.Error, `needs the admin role "release"`) || !strings.Contains(refused.Error, `"worker.dns.local"`) {
		t.Errorf("403 body %+v (%v); want the missing role and the identity", refused, err)
	}
	if line := p.MustWaitLog(t, "admin call refused"); line["role"] != "release" || line["identity"] != certstest.IdentityDNS {
		t.Errorf("refusal log line %v", line)
	}
	holder.SendHeartbeat()
	if f, err := holder.ReadErr(safety); err != nil || f.Type != protocol.TypeAcquired || f.Token != granted.Token {
		t.Fatalf("holder after a refused release: %+v %v; want it still holding %d", f, err, granted.Token)
	}

	// Nobody may kick yet; after SIGHUP with a rule for it, ana may.
	kick := "/api/locks/deploy/waiters/" + waiter.NC.LocalAddr().String()
	ana.must(t, "DELETE", kick, 403)
	writeFile(t, adminACL, `{"rules": [{"identity": "spiffe://lab/worker/*", "roles": ["read", "release", "kick"]}]}`)
	if err := p.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	p.MustWaitLog(t, "admin ACL reloaded")
	ana.must(t, "DELETE", kick, 200)
	if f, err := waiter.ReadErr(safety); err != nil || f.Code != protocol.CodeClosedByAdmin {
		t.Fatalf("kicked waiter: %+v %v; want ERROR 0x02", f, err)
	}
	ana.must(t, "POST", "/api/locks/deploy/release", 200)
	if f, err := holder.ReadErr(safety); err != nil || f.Code != protocol.CodeClosedByAdmin {
		t.Fatalf("holder after the release: %+v %v; want ERROR 0x02", f, err)
	}
	if w := dashboard.whoami(t); len(w.Roles) != 0 {
		t.Errorf("the reloaded ACL has no rule for %s, yet whoami says %v", w.Identity, w.Roles)
	}

	operators := map[string]any{}
	for _, line := range auditLines(t, auditPath, 4) {
		if ev := line["event"].(string); ev == "force_release" || ev == "kick_waiter" {
			operators[ev] = line["operator"]
		}
	}
	if operators["force_release"] != certstest.IdentityURI || operators["kick_waiter"] != certstest.IdentityURI {
		t.Errorf("audit operators %v; want %s on force_release and kick_waiter", operators, certstest.IdentityURI)
	}
	families := scrape(t, p.OpsAddr)
	for _, role := range []string{"read", "release", "kick"} { // the CN's listing, the dashboard's release, ana's first kick
		if got, want := value(t, families, "monolock_admin_denials_total", "role", role), 1.0; got != want {
			t.Errorf(`monolock_admin_denials_total{role=%q} = %v, want %v`, role, got, want)
		}
	}

	// Rotation: a new certificate reaches new admin connections.
	rotated := pki.RotateServer(t)
	if err := p.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	p.MustWaitLog(t, "admin TLS files reloaded")
	conn, err := tls.Dial("tcp", p.AdminAddr, pki.ClientTLS(certstest.ClientURI))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got := conn.ConnectionState().PeerCertificates[0].SerialNumber; got.Cmp(rotated.SerialNumber) != 0 {
		t.Errorf("after SIGHUP the admin port shows serial %v, want the rotated %v", got, rotated.SerialNumber)
	}
}

// TestAdminRefusesStrangers: without a client certificate, with one from an
// untrusted CA, or in plain HTTP, nothing is answered but the refusal.
func TestAdminRefusesStrangers(t *testing.T) {
	dir, pki, _ := labFiles(t)
	adminACL := filepath.Join(dir, "admin-acl.json")
	writeFile(t, adminACL, operatorRules)
	p := startServer(t, adminTLSArgs(pki, adminACL)...)
	for _, who := range []string{"", certstest.ClientUntrusted, certstest.ClientExpired} {
		if code, body, err := newOperator(pki, p.AdminAddr, who).do("GET", "/api/whoami"); err == nil {
			t.Errorf("client certificate %q: answered %d %s; want the handshake refused", who, code, body)
		}
	}
	code, body := get(t, "http://"+p.AdminAddr+"/api/locks")
	if code != http.StatusBadRequest || !strings.Contains(body, "HTTPS") {
		t.Errorf("plain HTTP to the HTTPS admin port: %d %q; want net/http's 400", code, body)
	}
}

// TestAdminTLSHandshakeIsBounded: a TLS client that stalls its handshake on
// the admin port is closed at the handshake deadline (ReadHeaderTimeout),
// and clients stalled inside the connection cap are evicted for one that
// completes its handshake.
func TestAdminTLSHandshakeIsBounded(t *testing.T) {
	dir, pki, _ := labFiles(t)
	adminACL := filepath.Join(dir, "admin-acl.json")
	writeFile(t, adminACL, operatorRules)
	hello := partialClientHello(t)

	short := opshttp.DefaultLimits(1024)
	short.ReadHeaderTimeout = 200 * time.Millisecond
	d := startInProcess(t, short, io.Discard, adminTLSArgs(pki, adminACL)...)
	for _, sent := range [][]byte{nil, hello} { // silent, and half a ClientHello
		c := stall(t, d.admin.Addr, sent)
		_ = c.SetReadDeadline(time.Now().Add(safety)) // a net against a hung test
		if n, err := c.Read(make([]byte, 1)); n != 0 || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("a client that sent %d bytes of its handshake: read %d, %v; want the server to close it", len(sent), n, err)
		}
	}

	// A cap of 2 full of stalled handshakes; the deadline is far away, so
	// only eviction makes room.
	long := opshttp.DefaultLimits(1024)
	long.ReadHeaderTimeout, long.ReadTimeout, long.WriteTimeout = time.Hour, time.Hour, time.Hour
	long.MaxConns = 2
	d = startInProcess(t, long, io.Discard, adminTLSArgs(pki, adminACL)...)
	for range long.MaxConns {
		stall(t, d.admin.Addr, hello)
	}
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "https://"+d.admin.Addr+"/api/whoami", nil)
	resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: pki.ClientTLS(certstest.ClientURI)}}).Do(req)
	if err != nil {
		t.Fatalf("with the cap full of stalled handshakes: %v; want an answer", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("whoami with the cap full of stalled handshakes: %d", resp.StatusCode)
	}
}

// stall connects to addr, sends sent and no more; the test's end closes it.
func stall(t *testing.T, addr string, sent []byte) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.Write(sent); err != nil {
		t.Fatal(err)
	}
	return c
}

// partialClientHello is the first half of a real ClientHello: a client
// stalled in the middle of its handshake.
func partialClientHello(t *testing.T) []byte {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() { _ = tls.Client(a, &tls.Config{ServerName: "localhost"}).Handshake() }()
	buf := make([]byte, 4096)
	n, err := b.Read(buf)
	if err != nil || n < 10 {
		t.Fatalf("reading a ClientHello: %d bytes, %v", n, err)
	}
	return buf[:n/2]
}

// TestAdminFailsClosed: an admin API beyond loopback without mutual TLS is a
// configuration error that says what to add, unless the operator accepts
// the risk; loopback keeps working without TLS.
func TestAdminFailsClosed(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "203.0.113.7:7071", "admin.internal:7071"} {
		cmd := exec.Command(binary, "-listen", "127.0.0.1:0", "-admin-listen", addr)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 {
			t.Errorf("-admin-listen %s: %v, want exit status 2", addr, err)
		}
		msg := stderr.String()
		for _, want := range []string{"-admin-listen " + addr + " is not a loopback address", "-admin-tls-client-ca", "-admin-acl-file", "-admin-allow-unauthenticated", "127.0.0.1"} {
			if !strings.Contains(msg, want) {
				t.Errorf("-admin-listen %s: stderr %q lacks %q", addr, msg, want)
			}
		}
	}
	for _, c := range []struct {
		args []string
		vars map[string]string
	}{
		{[]string{"-admin-listen", "0.0.0.0:7071", "-admin-allow-unauthenticated"}, nil},
		{[]string{"-admin-listen", "0.0.0.0:7071", "-admin-allow-unauthenticated=true"}, nil},
		{nil, map[string]string{"MONOLOCK_ADMIN_LISTEN_ADDRESS": "0.0.0.0:7071", "MONOLOCK_ADMIN_ALLOW_UNAUTHENTICATED": "true"}},
		{[]string{"-admin-listen", "localhost:7071"}, nil},
		{[]string{"-admin-listen", "127.0.0.5:7071"}, nil},
		{[]string{"-admin-listen", "[::1]:7071"}, nil},
	} {
		if _, err := parseSettings(c.args, env(c.vars), io.Discard); err != nil {
			t.Errorf("%v %v: %v; want accepted", c.args, c.vars, err)
		}
	}
	if _, err := parseSettings([]string{"-admin-listen", "0.0.0.0:7071", "-admin-allow-unauthenticated=false"}, env(nil), io.Discard); err == nil {
		t.Error("-admin-allow-unauthenticated=false accepted an exposed admin API")
	}
	// -h names the flag's risk.
	var help bytes.Buffer
	if _, err := parseSettings([]string{"-h"}, env(nil), &help); !errors.Is(err, errUsage) {
		t.Fatal(err)
	}
	var row string
	for _, line := range strings.Split(help.String(), "\n") {
		if strings.Contains(line, "-admin-allow-unauthenticated ") {
			row = line
		}
	}
	if !strings.Contains(row, "RISK") || !strings.Contains(row, "MONOLOCK_ADMIN_ALLOW_UNAUTHENTICATED") || !strings.Contains(row, "can force-release any lock") {
		t.Errorf("-h row %q; want the variable and the risk", row)
	}
}

func TestBadAdminSettings(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-admin-listen", "127.0.0.1:0", "-admin-tls-cert", "c.pem"}, "-admin-tls-cert needs -admin-tls-key"},
		{[]string{"-admin-listen", "127.0.0.1:0", "-admin-tls-key", "k.pem"}, "-admin-tls-key needs -admin-tls-cert"},
		{[]string{"-admin-listen", "127.0.0.1:0", "-admin-tls-client-ca", "ca.pem", "-admin-acl-file", "a.json"}, "-admin-tls-client-ca needs -admin-tls-cert"},
		{[]string{"-admin-listen", "127.0.0.1:0", "-admin-tls-cert", "c.pem", "-admin-tls-key", "k.pem", "-admin-acl-file", "a.json"}, "-admin-acl-file needs -admin-tls-client-ca"},
		{[]string{"-admin-listen", "127.0.0.1:0", "-admin-tls-cert", "c.pem", "-admin-tls-key", "k.pem", "-admin-tls-client-ca", "ca.pem"}, "-admin-tls-client-ca needs -admin-acl-file"},
		{[]string{"-admin-listen", "0.0.0.0:0", "-admin-tls-cert", "c.pem", "-admin-tls-key", "k.pem", "-admin-tls-client-ca", "ca.pem", "-admin-acl-file", "a.json", "-admin-allow-unauthenticated"}, "contradicts"},
		{[]string{"-admin-tls-cert", "c.pem", "-admin-tls-key", "k.pem"}, "need -admin-listen"},
		{[]string{"-admin-allow-unauthenticated"}, "need -admin-listen"},
		{[]string{"-admin-listen", "0.0.0.0:0", "-admin-allow-unauthenticated=maybe"}, `invalid -admin-allow-unauthenticated: want true or false, got "maybe"`},
	} {
		if _, err := parseSettings(c.args, env(nil), io.Discard); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v; want an error with %q", c.args, err, c.want)
		}
	}
	dir, pki, _ := labFiles(t)
	broken := filepath.Join(dir, "broken.json")
	writeFile(t, broken, `{"rules": [{"identity": "x", "locks": ["*"]}]}`)
	cmd := exec.Command(binary, append([]string{"-listen", "127.0.0.1:0"}, adminTLSArgs(pki, broken)...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 2 || !strings.Contains(stderr.String(), "-admin-acl-file "+broken) || !strings.Contains(stderr.String(), "grants roles, not locks") {
		t.Errorf("a lock ACL as -admin-acl-file: %v, stderr %q; want exit 2 naming the setting and the mistake", err, stderr.String())
	}
}
