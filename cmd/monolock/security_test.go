package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monolock/monolock/internal/certs/certstest"
	"github.com/monolock/monolock/internal/testsupport/wire"
	"github.com/monolock/monolock/protocol"
)

const labACL = `{"rules": [
  {"identity": "spiffe://lab/worker/*", "locks": ["nightly/*", "shard-?"]},
  {"identity": "worker.dns.local", "locks": ["dns-*"]},
  {"identity": "cn-worker", "locks": ["cn"]}
]}`

// labFiles makes the lab PKI in a new temporary directory and writes labACL
// there too.
func labFiles(t *testing.T) (dir string, pki *certstest.PKI, aclPath string) {
	t.Helper()
	dir = t.TempDir()
	pki = certstest.NewPKI(t, dir)
	aclPath = filepath.Join(dir, "acl.json")
	if err := os.WriteFile(aclPath, []byte(labACL), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, pki, aclPath
}

// dialTLS opens a TLS protocol connection with the named client certificate.
func dialTLS(t *testing.T, pki *certstest.PKI, addr, who string) (*wire.Conn, error) {
	t.Helper()
	c, err := wire.Dial(addr, wire.Options{TLS: pki.ClientTLS(who), Label: who})
	if err != nil {
		return nil, err
	}
	return c.Bind(t), nil
}

// try sends ACQUIRE for name on c and returns the first answer.
func try(t *testing.T, c *wire.Conn, name string) wire.Frame {
	t.Helper()
	c.SendAcquire(name, testLease)
	f, err := c.ReadErr(10 * time.Second)
	if err != nil {
		t.Fatalf("ACQUIRE %q: %v", name, err)
	}
	return f
}

func TestMutualTLSAndACL(t *testing.T) {
	dir, pki, aclPath := labFiles(t)
	auditPath := filepath.Join(dir, "audit.jsonl")
	p := startServer(t, "-tls-cert", pki.Server.Cert, "-tls-key", pki.Server.Key, "-tls-client-ca", pki.CA,
		"-acl-file", aclPath, "-audit-log", auditPath, "-admin-listen", "127.0.0.1:0", "-ops-listen", "127.0.0.1:0")

	cases := []struct {
		client string
		lock   string
		ok     bool
	}{
		{certstest.ClientURI, "nightly/a/b", true},
		{certstest.ClientURI, "shard-3", true},
		{certstest.ClientURI, "shard-31", false},
		{certstest.ClientURI, "dns-x", false},
		{certstest.ClientDNS, "dns-x", true},
		{certstest.ClientDNS, "nightly/a", false},
		{certstest.ClientDNS, "cn", false},
		{certstest.ClientCN, "cn", true},
		{certstest.ClientCN, "cn2", false},
		{certstest.ClientCN, "dns-x", false},
	}
	for _, c := range cases {
		cl, err := dialTLS(t, pki, p.Addr, c.client)
		if err != nil {
			t.Fatalf("%s: TLS: %v", c.client, err)
		}
		f := try(t, cl, c.lock)
		switch {
		case c.ok && f.Type != protocol.TypeAcquired:
			t.Errorf("%s on %q: got %+v, want ACQUIRED", c.client, c.lock, f)
		case !c.ok && (f.Type != protocol.TypeError || f.Code != protocol.CodeNotAuthorized):
			t.Errorf("%s on %q: got %+v, want ERROR 0x18", c.client, c.lock, f)
		case !c.ok:
			if _, err := cl.ReadErr(10 * time.Second); !errors.Is(err, io.EOF) {
				t.Errorf("%s on %q: want EOF after 0x18, got %v", c.client, c.lock, err)
			}
		}
		if c.ok && c.lock != "nightly/a/b" {
			_ = cl.NC.Close()
		}
	}

	// Refused at the handshake: no certificate, an untrusted one, plaintext.
	for _, name := range []string{"", certstest.ClientUntrusted} {
		cl, err := dialTLS(t, pki, p.Addr, name)
		if err == nil {
			// TLS 1.3 reports the client-certificate verdict on the first read
			// (or, once the server has given up on the socket, on a write).
			if err = cl.SendErr(wire.Acquire("nightly/x", testLease)); err == nil {
				_, err = cl.ReadErr(10 * time.Second)
			}
		}
		if err == nil {
			t.Errorf("client %q got a lock without a trusted certificate", name)
		}
	}
	plain := wire.MustDial(t, p.Addr, wire.Options{})
	plain.SendAcquire("nightly/x", testLease)
	if f, err := plain.ReadErr(10 * time.Second); err == nil && f.Type == protocol.TypeAcquired {
		t.Error("a plaintext client got a lock on the TLS port")
	}

	// The admin API shows the holder's identity.
	_, body := get(t, "http://"+p.AdminAddr+"/api/locks/nightly%2Fa%2Fb")
	var lock struct {
		Holder struct {
			Identity string `json:"identity"`
		} `json:"holder"`
	}
	if err := json.Unmarshal([]byte(body), &lock); err != nil || lock.Holder.Identity != certstest.IdentityURI {
		t.Errorf("admin API holder: %s (%v)", body, err)
	}
	if got := value(t, scrape(t, p.OpsAddr), "monolock_acl_denials_total"); got != 6 {
		t.Errorf("acl_denials_total = %v, want 6", got)
	}
	if got := value(t, scrape(t, p.OpsAddr), "monolock_tls_handshake_errors_total"); got < 2 {
		t.Errorf("tls_handshake_errors_total = %v, want at least 2", got)
	}

	// The audit log carries denied and granted events with identities.
	seen := map[string]bool{}
	for _, l := range auditLines(t, auditPath, 10) {
		seen[l["event"].(string)+" "+l["identity"].(string)+" "+l["lock"].(string)] = true
	}
	for _, want := range []string{"granted " + certstest.IdentityURI + " nightly/a/b", "denied " + certstest.IdentityURI + " shard-31", "granted " + certstest.IdentityDNS + " dns-x", "denied " + certstest.IdentityCN + " dns-x"} {
		if !seen[want] {
			t.Errorf("audit log lacks %q", want)
		}
	}
}

// TestSIGHUPReload: a broken ACL keeps the previous rules; a rotated
// certificate reaches new connections while an old session keeps going.
func TestSIGHUPReload(t *testing.T) {
	_, pki, aclPath := labFiles(t)
	p := startServer(t, "-tls-cert", pki.Server.Cert, "-tls-key", pki.Server.Key, "-tls-client-ca", pki.CA, "-acl-file", aclPath)

	old, err := dialTLS(t, pki, p.Addr, certstest.ClientURI)
	if err != nil {
		t.Fatal(err)
	}
	if f := try(t, old, "nightly/long"); f.Type != protocol.TypeAcquired {
		t.Fatalf("old session: %+v", f)
	}
	oldSerial := old.NC.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber

	// A broken ACL: the old rules stay.
	if err := os.WriteFile(aclPath, []byte(`{"rules": [{"identity": ""}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	p.MustWaitLog(t, "ACL not reloaded")
	if cl, err := dialTLS(t, pki, p.Addr, certstest.ClientURI); err != nil || try(t, cl, "shard-4").Type != protocol.TypeAcquired {
		t.Fatalf("after a broken ACL the old rules must stay: %v", err)
	}

	// Rotate the server certificate.
	rotated := pki.RotateServer(t)
	if err := p.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	p.MustWaitLog(t, "TLS files reloaded")
	fresh, err := dialTLS(t, pki, p.Addr, certstest.ClientURI)
	if err != nil {
		t.Fatal(err)
	}
	got := fresh.NC.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber
	if got.Cmp(rotated.SerialNumber) != 0 || got.Cmp(oldSerial) == 0 {
		t.Fatalf("new connection sees serial %v, want the rotated %v", got, rotated.SerialNumber)
	}
	for range 3 { // the session opened before the rotation keeps heartbeating
		if err := old.SendErr(wire.Heartbeat); err != nil {
			t.Fatal(err)
		}
		if f, err := old.ReadErr(10 * time.Second); err != nil || f.Type != protocol.TypeAcquired {
			t.Fatalf("old session after rotation: %+v %v", f, err)
		}
	}
}

func TestBadSecuritySettingsExit2(t *testing.T) {
	dir := t.TempDir()
	pki := certstest.NewPKI(t, dir)
	broken := filepath.Join(dir, "broken.json")
	if err := os.WriteFile(broken, []byte(`{"rules": [`), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := [][]string{
		{"-tls-cert", pki.Server.Cert},
		{"-tls-key", pki.Server.Key},
		{"-tls-client-ca", pki.CA},
		{"-tls-cert", pki.Server.Cert, "-tls-key", pki.Server.Key, "-acl-file", broken},
		{"-tls-cert", pki.Server.Cert, "-tls-key", pki.Server.Key, "-tls-client-ca", pki.CA, "-acl-file", broken},
		{"-tls-cert", filepath.Join(dir, "missing.pem"), "-tls-key", pki.Server.Key},
		{"-tls-cert", pki.Server.Cert, "-tls-key", pki.CAKey},
		{"-audit-log", filepath.Join(dir, "no-such-dir", "audit.jsonl")},
	}
	for _, args := range cases {
		cmd := exec.Command(binary, append([]string{"-listen", "127.0.0.1:0"}, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 2 {
			t.Errorf("%v: %v, want exit status 2", args, err)
		}
		if lines := strings.Split(strings.TrimSpace(stderr.String()), "\n"); len(lines) != 1 {
			t.Errorf("%v: want one line, got %q", args, stderr.String())
		}
	}
}
