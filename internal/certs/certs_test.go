package certs

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io/fs"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monolock/monolock/internal/certs/certstest"
)

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func readTestFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLoadErrors(t *testing.T) {
	p := newPKI(t)
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.pem")
	garbage := filepath.Join(dir, "garbage.pem")
	writeFile(t, garbage, []byte("this is not PEM\n"))
	encrypted := filepath.Join(dir, "encrypted-key.pem")
	writeFile(t, encrypted, pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: []byte{1, 2, 3}}))
	badCert := filepath.Join(dir, "bad-cert.pem")
	writeFile(t, badCert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1, 2, 3}}))
	badKey := filepath.Join(dir, "bad-key.pem")
	writeFile(t, badKey, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1, 2, 3}}))
	expired := p.Clients[certstest.ClientExpired]
	uri := p.Clients[certstest.ClientURI]

	cases := []struct {
		name  string
		files Files
		want  []string // substrings of the error
	}{
		{"nothing", Files{}, []string{"-tls-cert and -tls-key"}},
		{"cert without key", Files{Cert: p.Server.Cert}, []string{"-tls-cert and -tls-key"}},
		{"key without cert", Files{Key: p.Server.Key, ClientCA: p.CA}, []string{"-tls-cert and -tls-key"}},
		{"missing cert", Files{Cert: missing, Key: p.Server.Key}, []string{"certificate file " + missing, "no such file", "check the path"}},
		{"missing key", Files{Cert: p.Server.Cert, Key: missing}, []string{"key file " + missing, "no such file"}},
		{"missing client CA", Files{Cert: p.Server.Cert, Key: p.Server.Key, ClientCA: missing}, []string{"client CA file " + missing, "no such file"}},
		{"key mismatch", Files{Cert: p.Server.Cert, Key: uri.Key}, []string{"cert and key do not match", uri.Key, p.Server.Cert}},
		{"client CA without certificates", Files{Cert: p.Server.Cert, Key: p.Server.Key, ClientCA: p.Server.Key}, []string{"no certificates found in PEM file " + p.Server.Key, "client CA file", "PRIVATE KEY"}},
		{"client CA not PEM", Files{Cert: p.Server.Cert, Key: p.Server.Key, ClientCA: garbage}, []string{"no certificates found in PEM file " + garbage}},
		{"cert file holds a key", Files{Cert: p.Server.Key, Key: p.Server.Key}, []string{"no certificates found in PEM file " + p.Server.Key, "key file given where a certificate belongs"}},
		{"key file holds a cert", Files{Cert: p.Server.Cert, Key: p.Server.Cert}, []string{"no private key found in PEM file " + p.Server.Cert, "certificate given where the key belongs"}},
		{"key file not PEM", Files{Cert: p.Server.Cert, Key: garbage}, []string{"no private key found in PEM file " + garbage}},
		{"encrypted key", Files{Cert: p.Server.Cert, Key: encrypted}, []string{"key file " + encrypted + " is encrypted", "openssl pkey"}},
		{"corrupt certificate", Files{Cert: badCert, Key: p.Server.Key}, []string{"certificate file " + badCert, "does not parse"}},
		{"corrupt key", Files{Cert: p.Server.Cert, Key: badKey}, []string{"key file " + badKey, "does not parse"}},
		{"corrupt client CA", Files{Cert: p.Server.Cert, Key: p.Server.Key, ClientCA: badCert}, []string{"client CA file " + badCert, "does not parse"}},
		{"expired certificate", Files{Cert: expired.Cert, Key: expired.Key}, []string{"certificate in " + expired.Cert, "expired", "renew"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Load(c.files)
			if err == nil {
				t.Fatalf("Load(%+v) = %v, want an error", c.files, cfg)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q is not one line", err)
			}
			if _, err := NewReloader(c.files); err == nil {
				t.Errorf("NewReloader(%+v) succeeded", c.files)
			}
		})
	}
	if _, err := Load(Files{Cert: missing, Key: p.Server.Key}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v is not fs.ErrNotExist", err)
	}
}

func TestLoadKeyFormats(t *testing.T) {
	p := newPKI(t)
	dir := t.TempDir()

	// SEC 1 ("EC PRIVATE KEY"), as openssl ecparam -genkey writes it.
	block, _ := pem.Decode(readTestFile(t, p.Server.Key))
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	sec1, err := x509.MarshalECPrivateKey(k.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	ecPath := filepath.Join(dir, "ec-key.pem")
	writeFile(t, ecPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1}))
	if _, err := Load(Files{Cert: p.Server.Cert, Key: ecPath}); err != nil {
		t.Errorf("SEC 1 key: %v", err)
	}

	// PKCS #1 ("RSA PRIVATE KEY") with a self-signed RSA certificate.
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "rsa"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &rsaKey.PublicKey, rsaKey)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath := filepath.Join(dir, "rsa.pem"), filepath.Join(dir, "rsa-key.pem")
	writeFile(t, certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	writeFile(t, keyPath, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaKey)}))
	if _, err := Load(Files{Cert: certPath, Key: keyPath}); err != nil {
		t.Errorf("PKCS #1 key: %v", err)
	}
	// An RSA key with the EC certificate does not match.
	if _, err := Load(Files{Cert: p.Server.Cert, Key: keyPath}); err == nil || !strings.Contains(err.Error(), "cert and key do not match") {
		t.Errorf("RSA key with EC certificate: %v", err)
	}
}

func TestLoadConfig(t *testing.T) {
	p := newPKI(t)
	cfg, err := Load(plainFiles(p))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinVersion != tls.VersionTLS12 || cfg.ClientAuth != tls.NoClientCert || cfg.ClientCAs != nil {
		t.Errorf("plain TLS: MinVersion %x, ClientAuth %v, ClientCAs %v", cfg.MinVersion, cfg.ClientAuth, cfg.ClientCAs)
	}
	if len(cfg.Certificates) != 1 || cfg.Certificates[0].Leaf == nil || !cfg.Certificates[0].Leaf.Equal(p.ServerLeaf()) {
		t.Errorf("plain TLS: certificates %+v", cfg.Certificates)
	}
	cfg, err = Load(mtlsFiles(p))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinVersion != tls.VersionTLS12 || cfg.ClientAuth != tls.RequireAnyClientCert || cfg.ClientCAs == nil || cfg.VerifyConnection == nil {
		t.Errorf("mutual TLS: MinVersion %x, ClientAuth %v, ClientCAs %v", cfg.MinVersion, cfg.ClientAuth, cfg.ClientCAs)
	}
}

func TestPlainTLS(t *testing.T) {
	p := newPKI(t)
	cfg, err := Load(plainFiles(p))
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, cfg)
	for _, name := range []string{"", certstest.ClientURI} {
		a, tc, err := s.handshake(p.ClientTLS(name))
		if err != nil || a.err != nil {
			t.Fatalf("client %q: client error %v, server error %v", name, err, a.err)
		}
		if id := Identity(a.state); id != "" {
			t.Errorf("client %q: identity %q without mutual TLS, want empty", name, id)
		}
		if !presented(t, tc).Equal(p.ServerLeaf()) {
			t.Errorf("client %q: the server presented another certificate", name)
		}
	}
	// TLS 1.2 is the floor.
	old := p.ClientTLS("")
	old.MinVersion, old.MaxVersion = tls.VersionTLS11, tls.VersionTLS11
	if _, _, err := s.handshake(old); err == nil {
		t.Error("a TLS 1.1 client got through")
	}
}

func TestMutualTLS(t *testing.T) {
	p := newPKI(t)
	cfg, err := Load(mtlsFiles(p))
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, cfg)
	cases := []struct {
		client   string
		identity string // "" means the handshake must fail
	}{
		{"", ""},
		{certstest.ClientUntrusted, ""},
		{certstest.ClientExpired, ""},
		{certstest.ClientURI, certstest.IdentityURI},
		{certstest.ClientDNS, certstest.IdentityDNS},
		{certstest.ClientCN, certstest.IdentityCN},
		{certstest.ClientAll, certstest.IdentityAll},
		{certstest.ClientDNSCN, certstest.IdentityDNSCN},
	}
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		for _, c := range cases {
			clientCfg := p.ClientTLS(c.client)
			clientCfg.MaxVersion = version
			a, _, err := s.handshake(clientCfg)
			if c.identity == "" {
				if err == nil || a.err == nil {
					t.Errorf("TLS %x, client %q: got through (client error %v, server error %v)", version, c.client, err, a.err)
				}
				continue
			}
			if err != nil || a.err != nil {
				t.Errorf("TLS %x, client %q: client error %v, server error %v", version, c.client, err, a.err)
				continue
			}
			if got := Identity(a.state); got != c.identity {
				t.Errorf("TLS %x, client %q: identity %q, want %q", version, c.client, got, c.identity)
			}
		}
	}
}

func TestIdentity(t *testing.T) {
	u, _ := url.Parse("spiffe://lab/a")
	u2, _ := url.Parse("spiffe://lab/b")
	cert := func(cn string, dns []string, uris ...*url.URL) *x509.Certificate {
		return &x509.Certificate{Subject: pkix.Name{CommonName: cn}, DNSNames: dns, URIs: uris}
	}
	// Load's configuration verifies in VerifyConnection: crypto/tls reports
	// the certificates and no verified chains.
	verified := func(c *x509.Certificate) tls.ConnectionState {
		return tls.ConnectionState{PeerCertificates: []*x509.Certificate{c}}
	}
	cases := []struct {
		name string
		cs   tls.ConnectionState
		want string
	}{
		{"no certificate", tls.ConnectionState{}, ""},
		{"URI wins", verified(cert("cn", []string{"a.local"}, u, u2)), "spiffe://lab/a"},
		{"DNS over CN", verified(cert("cn", []string{"a.local", "b.local"})), "a.local"},
		{"CN", verified(cert("cn", nil)), "cn"},
		{"nothing", verified(cert("", nil)), ""},
	}
	for _, c := range cases {
		if got := Identity(c.cs); got != c.want {
			t.Errorf("%s: Identity = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestReloadRotatesServerCertificate(t *testing.T) {
	p := newPKI(t)
	r, err := NewReloader(mtlsFiles(p))
	if err != nil {
		t.Fatal(err)
	}
	if r.Files() != mtlsFiles(p) {
		t.Errorf("Files() = %+v", r.Files())
	}
	s := startServer(t, r.ServerConfig())
	first := p.ServerLeaf()

	a, live, err := s.handshake(p.ClientTLS(certstest.ClientURI))
	if err != nil || a.err != nil {
		t.Fatalf("before rotation: client error %v, server error %v", err, a.err)
	}
	if !presented(t, live).Equal(first) {
		t.Fatal("before rotation: not the first certificate")
	}
	if got := Identity(a.state); got != certstest.IdentityURI {
		t.Errorf("identity %q through the reloader, want %q", got, certstest.IdentityURI)
	}

	second := p.RotateServer(t)
	// Until Reload, the files changing on disk changes nothing.
	if _, tc, err := s.handshake(p.ClientTLS(certstest.ClientURI)); err != nil || !presented(t, tc).Equal(first) {
		t.Fatalf("rotated files without Reload: err %v, or not the first certificate", err)
	}
	if err := r.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if !r.Current().Certificates[0].Leaf.Equal(second) {
		t.Error("Current() is not the rotated certificate")
	}
	a, tc, err := s.handshake(p.ClientTLS(certstest.ClientDNS))
	if err != nil || a.err != nil {
		t.Fatalf("after rotation: client error %v, server error %v", err, a.err)
	}
	if !presented(t, tc).Equal(second) {
		t.Error("after rotation: a new connection did not get the new certificate")
	}
	if got := Identity(a.state); got != certstest.IdentityDNS {
		t.Errorf("after rotation: identity %q, want %q", got, certstest.IdentityDNS)
	}
	// The session opened before the rotation carries on.
	if err := ping(live); err != nil {
		t.Errorf("the live session broke across the reload: %v", err)
	}
}

func TestReloadFailureKeepsPreviousMaterial(t *testing.T) {
	p := newPKI(t)
	r, err := NewReloader(mtlsFiles(p))
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, r.ServerConfig())
	good := p.ServerLeaf()
	goodCert, goodKey, goodCA := readTestFile(t, p.Server.Cert), readTestFile(t, p.Server.Key), readTestFile(t, p.CA)
	restore := func() {
		writeFile(t, p.Server.Cert, goodCert)
		writeFile(t, p.Server.Key, goodKey)
		writeFile(t, p.CA, goodCA)
	}
	breakages := []struct {
		name  string
		apply func()
		want  string
	}{
		{"garbage key", func() { writeFile(t, p.Server.Key, []byte("garbage")) }, "no private key found in PEM file " + p.Server.Key},
		{"truncated certificate", func() { writeFile(t, p.Server.Cert, goodCert[:len(goodCert)/2]) }, "certificate file " + p.Server.Cert + ": a PEM block with no END line"},
		{"client CA bundle cut inside its second certificate", func() {
			writeFile(t, p.CA, append(append([]byte{}, goodCA...), goodCert[:len(goodCert)*2/3]...))
		}, "client CA file " + p.CA + ": a PEM block with no END line"},
		{"text after the key", func() { writeFile(t, p.Server.Key, append(append([]byte{}, goodKey...), "MIIE"...)) }, "key file " + p.Server.Key + ": text that is not a complete PEM block"},
		{"key of another certificate", func() { writeFile(t, p.Server.Key, readTestFile(t, p.Clients[certstest.ClientURI].Key)) }, "cert and key do not match"},
		{"missing client CA", func() {
			if err := os.Remove(p.CA); err != nil {
				t.Fatal(err)
			}
		}, "client CA file " + p.CA},
		{"empty client CA", func() { writeFile(t, p.CA, nil) }, "no certificates found in PEM file " + p.CA},
		{"a new certificate whose key is bad", func() {
			p.RotateServer(t)
			writeFile(t, p.Server.Key, []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"))
		}, "does not parse"},
	}
	for _, b := range breakages {
		b.apply()
		err := r.Reload()
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s: Reload error %v, want one containing %q", b.name, err, b.want)
		}
		a, tc, err := s.handshake(p.ClientTLS(certstest.ClientCN))
		if err != nil || a.err != nil {
			t.Errorf("%s: after the failed reload: client error %v, server error %v", b.name, err, a.err)
		} else if !presented(t, tc).Equal(good) {
			t.Errorf("%s: after the failed reload the server presents another certificate", b.name)
		}
		if _, _, err := s.handshake(p.ClientTLS(certstest.ClientUntrusted)); err == nil {
			t.Errorf("%s: after the failed reload an untrusted client got through", b.name)
		}
		restore()
	}
	if err := r.Reload(); err != nil {
		t.Errorf("Reload with the files restored: %v", err)
	}
}

func TestReloadClientCA(t *testing.T) {
	p := newPKI(t)
	r, err := NewReloader(mtlsFiles(p))
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, r.ServerConfig())
	_, live, err := s.handshake(p.ClientTLS(certstest.ClientURI))
	if err != nil {
		t.Fatal(err)
	}
	// Trust the other CA instead: the untrusted client gets in, the others
	// no longer do; the session already open carries on.
	writeFile(t, p.CA, readTestFile(t, p.OtherCA))
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.handshake(p.ClientTLS(certstest.ClientURI)); err == nil {
		t.Error("a client of the CA no longer trusted got through")
	}
	a, _, err := s.handshake(p.ClientTLS(certstest.ClientUntrusted))
	if err != nil || a.err != nil {
		t.Errorf("a client of the newly trusted CA: client error %v, server error %v", err, a.err)
	} else if got := Identity(a.state); got != certstest.IdentityURI {
		t.Errorf("identity %q, want %q", got, certstest.IdentityURI)
	}
	if err := ping(live); err != nil {
		t.Errorf("the live session broke across the reload: %v", err)
	}
}

func TestResumedSessionAfterCARotation(t *testing.T) {
	// A session ticket issued under the old client CA must not let a client
	// in once its CA is no longer trusted.
	p := newPKI(t)
	r, err := NewReloader(mtlsFiles(p))
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, r.ServerConfig())
	cfg := p.ClientTLS(certstest.ClientURI)
	cfg.ClientSessionCache = tls.NewLRUClientSessionCache(4)
	if _, _, err := s.handshake(cfg); err != nil {
		t.Fatal(err)
	}
	if _, tc, err := s.handshake(cfg); err != nil {
		t.Fatal(err)
	} else if !tc.ConnectionState().DidResume {
		t.Log("the second connection did not resume; the check below proves less")
	}
	writeFile(t, p.CA, readTestFile(t, p.OtherCA))
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.handshake(cfg); err == nil {
		t.Error("a resumed session got in after its client CA was removed")
	}
}

func TestReloadConcurrentWithHandshakes(t *testing.T) {
	p := newPKI(t)
	r, err := NewReloader(mtlsFiles(p))
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, r.ServerConfig())
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = r.Reload() // may fail while RotateServer is between its renames
		}
	}()
	for i := 0; i < 10; i++ {
		if i%3 == 0 {
			p.RotateServer(t)
		}
		a, _, err := s.handshake(p.ClientTLS(certstest.ClientAll))
		if err != nil || a.err != nil {
			t.Errorf("handshake %d: client error %v, server error %v", i, err, a.err)
		}
	}
	close(stop)
	wg.Wait()
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	_, tc, err := s.handshake(p.ClientTLS(certstest.ClientAll))
	if err != nil || !presented(t, tc).Equal(p.ServerLeaf()) {
		t.Errorf("after the last reload: err %v, or not the last certificate", err)
	}
}
