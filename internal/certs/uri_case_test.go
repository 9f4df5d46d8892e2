package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"math/big"
	"os"
	"testing"
	"time"

	"github.com/monolock/monolock/internal/acl"
	"github.com/monolock/monolock/internal/certs/certstest"
)

// The identity of a URI SAN is the URI as Go's x509 parser reads it. That
// parser goes through net/url, which lowercases the scheme (RFC 3986 makes the
// scheme case-insensitive) and keeps the rest exactly as written. So a
// certificate whose SAN says "SPIFFE://lab/worker/7" has the identity
// "spiffe://lab/worker/7" and gets what that identity is allowed, while a
// different case anywhere after the scheme is a different identity.
// docs/security.md states this rule; the certificates here carry the SAN
// bytes exactly as given, as openssl would write them.
func TestURISANSchemeCaseIsFolded(t *testing.T) {
	p := certstest.NewPKI(t, t.TempDir())
	cfg, err := Load(mtlsFiles(p))
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, cfg)
	rules, err := acl.Parse([]byte(`{"rules": [{"identity": "spiffe://lab/worker/*", "locks": ["nightly/*"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		san, identity string
		allowed       bool
	}{
		{"spiffe://lab/worker/7", "spiffe://lab/worker/7", true},
		{"SPIFFE://lab/worker/7", "spiffe://lab/worker/7", true},
		{"Spiffe://lab/worker/7", "spiffe://lab/worker/7", true},
		{"spiffe://LAB/worker/7", "spiffe://LAB/worker/7", false},
		{"spiffe://lab/Worker/7", "spiffe://lab/Worker/7", false},
	} {
		a, _, err := s.handshake(clientWithURISAN(t, p, c.san))
		if err != nil || a.err != nil {
			t.Fatalf("SAN %q: client error %v, server error %v", c.san, err, a.err)
		}
		got := Identity(a.state)
		if got != c.identity {
			t.Errorf("SAN %q: identity %q, want %q", c.san, got, c.identity)
		}
		if allowed := rules.Allowed(got, "nightly/x"); allowed != c.allowed {
			t.Errorf("SAN %q: ACL rule spiffe://lab/worker/* allows nightly/x: %v, want %v", c.san, allowed, c.allowed)
		}
	}
}

// clientWithURISAN is a client configuration with a certificate from the
// PKI's CA whose only name is a URI SAN with exactly the bytes of uri. The
// extension is written by hand: x509.Certificate.URIs would normalize it.
func clientWithURISAN(t *testing.T, p *certstest.PKI, uri string) *tls.Config {
	t.Helper()
	caCert, caKey := readCA(t, p)
	san, err := asn1.Marshal([]asn1.RawValue{{Class: asn1.ClassContextSpecific, Tag: 6, Bytes: []byte(uri)}})
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		// An empty subject needs a critical SAN (RFC 5280).
		ExtraExtensions: []pkix.Extension{{Id: asn1.ObjectIdentifier{2, 5, 29, 17}, Critical: true, Value: san}},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	cfg := p.ClientTLS("")
	cfg.Certificates = []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}
	return cfg
}

func readCA(t *testing.T, p *certstest.PKI) (*x509.Certificate, any) {
	t.Helper()
	block := func(path string) []byte {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := pem.Decode(data)
		if b == nil {
			t.Fatalf("%s: no PEM block", path)
		}
		return b.Bytes
	}
	cert, err := x509.ParseCertificate(block(p.CA))
	if err != nil {
		t.Fatal(err)
	}
	key, err := x509.ParsePKCS8PrivateKey(block(p.CAKey))
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}
