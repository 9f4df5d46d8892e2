package main

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/monolock/monolock/eventloop"
	"github.com/monolock/monolock/internal/acl"
	"github.com/monolock/monolock/internal/adminhttp"
	"github.com/monolock/monolock/internal/certs"
	"github.com/monolock/monolock/internal/certs/certstest"
	"github.com/monolock/monolock/internal/testsupport/inproc"
	"github.com/monolock/monolock/internal/testsupport/wire"
	"github.com/monolock/monolock/protocol"
)

// mtlsAdmin is a real server with its admin API on an HTTPS loopback
// listener that asks for operator certificates: the lab's URI identity may
// read and release, the DNS one only read.
func mtlsAdmin(t *testing.T) (*inproc.Server, *httptest.Server, *certstest.PKI) {
	t.Helper()
	pki := certstest.NewPKI(t, t.TempDir())
	rules, err := acl.ParseAdmin([]byte(`{"rules": [
	  {"identity": "spiffe://lab/worker/*", "roles": ["read", "release"]},
	  {"identity": "worker.dns.local", "roles": ["read"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	srv := inproc.Start(t, eventloop.Config{})
	api := httptest.NewUnstartedServer(adminhttp.New(srv, adminhttp.Info{Access: adminhttp.CertAccess(rules)}))
	if api.TLS, err = certs.Load(certs.Files{Cert: pki.Server.Cert, Key: pki.Server.Key, ClientCA: pki.CA}); err != nil {
		t.Fatal(err)
	}
	api.StartTLS()
	t.Cleanup(api.Close)
	return srv, api, pki
}

// operatorFlags are the admin TLS flags of the named client certificate.
func operatorFlags(pki *certstest.PKI, who string) []string {
	c := pki.Clients[who]
	return []string{"-admin-tls-ca", pki.CA, "-admin-tls-cert", c.Cert, "-admin-tls-key", c.Key}
}

// TestAdminOverMutualTLS: the admin commands speak HTTPS with an operator
// certificate, from flags or the environment; whoami shows the roles, and a
// command without its role is refused with the rule that grants it.
func TestAdminOverMutualTLS(t *testing.T) {
	srv, api, pki := mtlsAdmin(t)
	addr := api.Listener.Addr().String() // host:port: the -admin-tls-* flags make it HTTPS

	status, out, stderr := runCtl(t, "", nil, append([]string{"whoami", "-admin", addr}, operatorFlags(pki, certstest.ClientURI)...)...)
	if status != 0 || !strings.Contains(out, "identity: "+certstest.IdentityURI) || !strings.Contains(out, "roles:    read, release") {
		t.Errorf("whoami: %d %q %q", status, out, stderr)
	}
	dns := pki.Clients[certstest.ClientDNS]
	viaEnv := []string{"MONOLOCK_ADMIN_ADDRESS=" + addr, "MONOLOCK_ADMIN_TLS_CA=" + pki.CA, "MONOLOCK_ADMIN_TLS_CERT=" + dns.Cert, "MONOLOCK_ADMIN_TLS_KEY=" + dns.Key}
	if status, out, stderr := runCtl(t, "", viaEnv, "whoami"); status != 0 || !strings.Contains(out, "identity: "+certstest.IdentityDNS) || !strings.Contains(out, "roles:    read\n") {
		t.Errorf("whoami from the environment: %d %q %q", status, out, stderr)
	}

	holder, tok := wire.Holder(t, srv.Addr().String(), wire.Options{Safety: patience}, "deploy", testLease)
	if status, out, _ := runCtl(t, "", viaEnv, "locks"); status != 0 || !strings.Contains(out, "deploy") {
		t.Errorf("locks with read: %d %q", status, out)
	}
	status, _, stderr = runCtl(t, "", viaEnv, "release", "deploy")
	if status != exitFailed || !strings.Contains(stderr, `needs the admin role "release"`) || !strings.Contains(stderr, `"worker.dns.local"`) {
		t.Errorf("release without the role: %d %q; want exit 1 naming the role and the identity", status, stderr)
	}
	holder.SendHeartbeat()
	if got := holder.Expect(protocol.TypeAcquired).Token; got != tok {
		t.Fatalf("after a refused release the holder's token is %d, want %d", got, tok)
	}
	if status, out, stderr := runCtl(t, "", nil, append([]string{"release", "-admin", addr}, append(operatorFlags(pki, certstest.ClientURI), "deploy")...)...); status != 0 {
		t.Fatalf("release with the role: %d %q %q", status, out, stderr)
	}
	holder.ExpectCodeThenEOF(protocol.CodeClosedByAdmin)
}

// TestAdminTLSMismatches: each way the command's TLS settings can miss the
// admin port is a usage error (exit 2) that says what to change.
func TestAdminTLSMismatches(t *testing.T) {
	_, api, pki := mtlsAdmin(t)
	addr := api.Listener.Addr().String()
	plain := startAdminServer(t, nil)
	plainAddr := plain.api.Listener.Addr().String()
	untrusted := pki.Clients[certstest.ClientUntrusted]
	uri := pki.Clients[certstest.ClientURI]
	expired := pki.Clients[certstest.ClientExpired]
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"plain request to HTTPS", []string{"-admin", addr}, "speaks HTTPS only: give -admin-tls-ca"},
		{"HTTPS to plain HTTP", append([]string{"-admin", plainAddr}, operatorFlags(pki, certstest.ClientURI)...), "answers plain HTTP, not HTTPS"},
		{"no operator certificate", []string{"-admin", addr, "-admin-tls-ca", pki.CA}, "asks for an operator certificate: give -admin-tls-cert and -admin-tls-key"},
		{"untrusted operator certificate", []string{"-admin", addr, "-admin-tls-ca", pki.CA, "-admin-tls-cert", untrusted.Cert, "-admin-tls-key", untrusted.Key}, "-admin-tls-cert is not signed by any of them"},
		{"expired operator certificate", []string{"-admin", addr, "-admin-tls-ca", pki.CA, "-admin-tls-cert", expired.Cert, "-admin-tls-key", expired.Key}, "refused the operator certificate"},
		{"server CA not given", []string{"-admin", addr, "-admin-tls-cert", uri.Cert, "-admin-tls-key", uri.Key}, "give -admin-tls-ca"},
		{"http:// with TLS flags", append([]string{"-admin", "http://" + addr}, operatorFlags(pki, certstest.ClientURI)...), "is plain HTTP, but -admin-tls-* flags are given"},
		{"cert without key", []string{"-admin", addr, "-admin-tls-cert", uri.Cert}, "-admin-tls-cert and -admin-tls-key go together"},
	} {
		status, out, stderr := runCtl(t, "", nil, append([]string{"whoami"}, c.args...)...)
		if status != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: %d %q %q; want exit 2 with %q", c.name, status, out, stderr, c.want)
		}
	}
	// Without TLS, on loopback, every caller has every role.
	if status, out, stderr := runCtl(t, "", nil, "whoami", "-admin", plainAddr); status != 0 || !strings.Contains(out, "every caller has every role") || !strings.Contains(out, "read, release, kick") {
		t.Errorf("whoami without TLS: %d %q %q", status, out, stderr)
	}
}
