package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func parseConn(t *testing.T, env map[string]string, args ...string) *connFlags {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c := addConnFlags(fs, func(k string) string { return env[k] })
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestConnFlagPrecedence(t *testing.T) {
	env := map[string]string{"MONOLOCK_ADDRESS": "env:1", "MONOLOCK_TLS_CA": "env-ca.pem"}
	if c := parseConn(t, nil); c.addr != "127.0.0.1:7070" || c.tlsCA != "" {
		t.Errorf("defaults: %+v", c)
	}
	if c := parseConn(t, env); c.addr != "env:1" || c.tlsCA != "env-ca.pem" {
		t.Errorf("environment: %+v", c)
	}
	if c := parseConn(t, env, "-addr", "flag:2", "-tls-ca", ""); c.addr != "flag:2" || c.tlsCA != "" {
		t.Errorf("flags: %+v", c)
	}
}

func TestDialer(t *testing.T) {
	dir := t.TempDir()
	ca, cert, key := writeCert(t, dir)
	if d, err := (&connFlags{}).dialer(); err != nil {
		t.Fatal(err)
	} else if _, ok := d.(*net.Dialer); !ok {
		t.Errorf("no TLS flags: %T, want *net.Dialer", d)
	}
	d, err := (&connFlags{tlsCA: ca, tlsCert: cert, tlsKey: key}).dialer()
	if err != nil {
		t.Fatal(err)
	}
	td, ok := d.(*tls.Dialer)
	if !ok || td.Config.RootCAs == nil || len(td.Config.Certificates) != 1 {
		t.Fatalf("TLS flags: %T %+v", d, d)
	}
	for _, tc := range []struct {
		flags connFlags
		want  string
	}{
		{connFlags{tlsCA: filepath.Join(dir, "missing.pem")}, "-tls-ca"},
		{connFlags{tlsCA: key}, "no PEM certificate"},
		{connFlags{tlsCert: cert}, "go together"},
		{connFlags{tlsCert: cert, tlsKey: ca}, "-tls-cert/-tls-key"},
	} {
		if _, err := tc.flags.dialer(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error mentioning %q", tc.flags, err, tc.want)
		}
	}
}

// writeCert writes a self-signed certificate (also its own CA) and its key.
func writeCert(t *testing.T, dir string) (caPath, certPath, keyPath string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "monolockctl test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	write := func(path, typ string, der []byte) {
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(certPath, "CERTIFICATE", der)
	write(keyPath, "PRIVATE KEY", keyDER)
	return certPath, certPath, keyPath
}

// TestAddrSeveral: -addr takes several addresses, separated by commas or in
// repeated flags; the first -addr replaces the environment's; each address
// is checked.
func TestAddrSeveral(t *testing.T) {
	env := map[string]string{"MONOLOCK_ADDRESS": "env:1,env:2"}
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{env, nil, "env:1,env:2"},
		{env, []string{"-addr", "a:1,b:2"}, "a:1,b:2"},
		{env, []string{"-addr", "a:1", "-addr", "b:2"}, "a:1,b:2"},
		{nil, []string{"-addr", "a:1", "-addr", "b:2,c:3"}, "a:1,b:2,c:3"},
	} {
		if c := parseConn(t, tc.env, tc.args...); c.addr != tc.want || c.addrFrom == "the default" {
			t.Errorf("%v with %v: addr %q (%s), want %q", tc.args, tc.env, c.addr, c.addrFrom, tc.want)
		}
	}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	addConnFlags(fs, func(string) string { return "" })
	if err := fs.Parse([]string{"-addr", "a:1,b"}); err == nil || !strings.Contains(err.Error(), "want host:port") {
		t.Errorf("-addr a:1,b: %v, want the bad address named", err)
	}
}
