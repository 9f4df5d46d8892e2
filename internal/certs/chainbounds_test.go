package certs

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"math/big"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/monolock/monolock/internal/certs/certstest"
)

// fakeCert is a parsed certificate as far as the bounds read one: its
// encoding's size, its subject, its SANs and its key. No signature is ever
// checked.
func fakeCert(size int, key any, sans int) *x509.Certificate {
	c := &x509.Certificate{Raw: make([]byte, size), PublicKey: key}
	c.RawSubject = []byte(rand.Text()) // 26 random characters: each fake certificate its own subject
	for i := range sans {
		switch i % 4 {
		case 0:
			c.DNSNames = append(c.DNSNames, "a.local")
		case 1:
			c.URIs = append(c.URIs, &url.URL{Scheme: "spiffe", Host: "lab"})
		case 2:
			c.IPAddresses = append(c.IPAddresses, net.IPv4(127, 0, 0, 1))
		case 3:
			c.EmailAddresses = append(c.EmailAddresses, "a@b.local")
		}
	}
	return c
}

// rsaKey is an RSA public key of exactly bits bits; the bounds read only
// its size.
func rsaKey(bits int) *rsa.PublicKey {
	n := new(big.Int).Lsh(big.NewInt(1), uint(bits-1))
	return &rsa.PublicKey{N: n.Add(n, big.NewInt(1)), E: 65537}
}

func ecKey(t *testing.T, c elliptic.Curve) *ecdsa.PublicKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(c, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &k.PublicKey
}

// TestChainBounds checks each bound at its limit, accepted, and one past
// it, refused with the bound's name.
func TestChainBounds(t *testing.T) {
	p256 := ecKey(t, elliptic.P256())
	ed := ed25519.PublicKey(make([]byte, ed25519.PublicKeySize))
	certs := func(n, size int) []*x509.Certificate {
		out := make([]*x509.Certificate, n)
		for i := range out {
			out[i] = fakeCert(size, p256, 1)
		}
		return out
	}
	keys := func(ks ...any) []*x509.Certificate {
		out := make([]*x509.Certificate, len(ks))
		for i, k := range ks {
			out[i] = fakeCert(500, k, 1)
		}
		return out
	}
	sameSubject := func(chain []*x509.Certificate, i, j int) []*x509.Certificate {
		chain[j].RawSubject = chain[i].RawSubject
		return chain
	}
	cases := []struct {
		name  string
		chain []*x509.Certificate
		bound string // "" accepted
	}{
		{"certificates at the limit", certs(MaxClientChainCerts, 500), ""},
		{"one certificate too many", certs(MaxClientChainCerts+1, 500), BoundChainCerts},
		{"61 certificates", certs(61, 500), BoundChainCerts},
		{"a certificate at the size limit", certs(1, MaxClientCertBytes), ""},
		{"a certificate one byte over", certs(1, MaxClientCertBytes+1), BoundCertBytes},
		{"a chain at the size limit", []*x509.Certificate{fakeCert(MaxClientCertBytes, p256, 1), fakeCert(MaxClientChainBytes-MaxClientCertBytes, p256, 0)}, ""},
		{"a chain one byte over", []*x509.Certificate{fakeCert(MaxClientCertBytes, p256, 1), fakeCert(MaxClientChainBytes-MaxClientCertBytes+1, p256, 0)}, BoundChainBytes},
		{"SANs at the limit", []*x509.Certificate{fakeCert(1000, p256, MaxClientCertSANs)}, ""},
		{"one SAN too many", []*x509.Certificate{fakeCert(1000, p256, MaxClientCertSANs+1)}, BoundSANs},
		{"an intermediate with one SAN too many", []*x509.Certificate{fakeCert(1000, p256, 1), fakeCert(1000, p256, MaxClientCertSANs+1)}, BoundSANs},
		{"the leaf named as its intermediate", sameSubject(certs(3, 500), 0, 1), ""},
		{"two intermediates of one name", sameSubject(certs(3, 500), 1, 2), BoundDuplicateSubject},
		{"P-256, Ed25519, RSA-2048", keys(p256, ed, rsaKey(MinClientRSABits)), ""},
		{"three RSA-3072", keys(rsaKey(3072), rsaKey(3072), rsaKey(3072)), ""},
		{"RSA at the upper limit with two P-256: the cost at the limit", keys(rsaKey(MaxClientRSABits), p256, p256), ""},
		{"two RSA-4096: over the cost", keys(rsaKey(MaxClientRSABits), rsaKey(MaxClientRSABits)), BoundCost},
		{"RSA one bit short", keys(rsaKey(MinClientRSABits - 1)), BoundKey},
		{"RSA one bit over", keys(rsaKey(MaxClientRSABits + 1)), BoundKey},
		{"P-384", keys(ecKey(t, elliptic.P384())), BoundKey},
		{"P-521", keys(ecKey(t, elliptic.P521())), BoundKey},
		{"a P-521 intermediate", keys(p256, ecKey(t, elliptic.P521())), BoundKey},
		{"P-224", keys(ecKey(t, elliptic.P224())), BoundKey},
		{"no key", keys(nil), BoundKey},
	}
	for _, c := range cases {
		err := checkChainBounds(c.chain)
		var be *ChainBoundError
		switch {
		case c.bound == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.bound != "" && !errors.As(err, &be):
			t.Errorf("%s: got %v, want a ChainBoundError for %s", c.name, err, c.bound)
		case c.bound != "" && be.Bound != c.bound:
			t.Errorf("%s: bound %s crossed (%v), want %s", c.name, be.Bound, err, c.bound)
		}
	}
}

// TestChainBoundsOverTLS runs chains at and past the bounds through real
// handshakes on loopback, in TLS 1.2 and 1.3: past a bound the client reads
// crypto/tls's alert and the server's error names the bound; at the bounds
// the client gets in with its identity.
func TestChainBoundsOverTLS(t *testing.T) {
	p := newPKI(t)
	cfg, err := Load(mtlsFiles(p))
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, cfg)
	must := func(c tls.Certificate, err error) tls.Certificate {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// The largest chain accepted: as many certificates and SANs as the
	// bounds allow, padded to the size bounds.
	atBounds := certstest.ChainOptions{Intermediates: MaxClientChainCerts - 1, SANs: MaxClientCertSANs - 1}
	cases := []struct {
		name  string
		cert  tls.Certificate
		bound string // "" accepted
	}{
		{"leaf and 60 forged P-521 CAs", must(p.ForgedChain(60, elliptic.P521())), BoundChainCerts},
		{"leaf and 2 forged P-521 CAs", must(p.ForgedChain(2, elliptic.P521())), BoundKey},
		{"leaf and 2 forged P-256 CAs", must(p.ForgedChain(2, elliptic.P256())), BoundDuplicateSubject},
		{"leaf and 2 intermediates", must(p.ClientChain(certstest.ChainOptions{Intermediates: MaxClientChainCerts - 1})), ""},
		{"leaf and 3 intermediates", must(p.ClientChain(certstest.ChainOptions{Intermediates: MaxClientChainCerts})), BoundChainCerts},
		{"a leaf with 16 SANs", must(p.ClientChain(certstest.ChainOptions{SANs: MaxClientCertSANs - 1})), ""},
		{"a leaf with 1,000 SANs", must(p.ClientChain(certstest.ChainOptions{SANs: 999})), BoundCertBytes},
		{"a chain at the size bounds", must(p.ClientChainOfSize(atBounds, MaxClientChainBytes)), ""},
		{"a chain 16 bytes over", must(p.ClientChainOfSize(atBounds, MaxClientChainBytes+16+8*MaxClientChainCerts)), BoundChainBytes},
		{"a P-384 intermediate", must(p.ClientChain(certstest.ChainOptions{Intermediates: 1, IntermediateKey: certstest.P384Key})), BoundKey},
		{"a P-521 intermediate", must(p.ClientChain(certstest.ChainOptions{Intermediates: 1, IntermediateKey: certstest.P521Key})), BoundKey},
	}
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		for _, c := range cases {
			clientCfg := p.WithCertificate(c.cert)
			clientCfg.MaxVersion = version
			a, _, err := s.handshake(clientCfg)
			if c.bound == "" {
				if err != nil || a.err != nil {
					t.Errorf("TLS %x, %s: client error %v, server error %v", version, c.name, err, a.err)
				} else if id := Identity(a.state); id != certstest.IdentityURI {
					t.Errorf("TLS %x, %s: identity %q, want %q", version, c.name, id, certstest.IdentityURI)
				}
				continue
			}
			var be *ChainBoundError
			if !errors.As(a.err, &be) || be.Bound != c.bound {
				t.Errorf("TLS %x, %s: server error %v, want the bound %s crossed", version, c.name, a.err, c.bound)
			}
			if err == nil || !strings.Contains(err.Error(), "bad certificate") {
				t.Errorf("TLS %x, %s: client error %v, want the bad-certificate alert", version, c.name, err)
			}
		}
	}
}

// TestVerifyClientChainClock: the verification runs on the injected clock,
// so a chain is refused before its leaf is valid and once it has expired
// (the CA and the intermediate, made a moment earlier, have expired a
// moment earlier: the error is an expiry all the same), and the bounds come
// first:
// a chain past a bound that would not verify either gets the bound's error.
func TestVerifyClientChainClock(t *testing.T) {
	p := newPKI(t)
	cfg, err := Load(mtlsFiles(p))
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.ClientChain(certstest.ChainOptions{Intermediates: 1})
	if err != nil {
		t.Fatal(err)
	}
	var chain []*x509.Certificate
	for _, der := range c.Certificate {
		parsed, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		chain = append(chain, parsed)
	}
	cs := tls.ConnectionState{PeerCertificates: chain}
	at := func(when time.Time) error {
		return verifyClientChain(cfg.ClientCAs, func() time.Time { return when })(cs)
	}
	if err := at(chain[0].NotBefore.Add(time.Second)); err != nil {
		t.Errorf("a second after the leaf's start: %v", err)
	}
	if err := at(chain[0].NotBefore.Add(-time.Second)); err == nil {
		t.Error("a second before the leaf's start: verified")
	}
	var ce x509.CertificateInvalidError
	if err := at(chain[0].NotAfter.Add(time.Second)); !errors.As(err, &ce) || ce.Reason != x509.Expired {
		t.Errorf("a second after the leaf expired: %v, want an expired-certificate error", err)
	}
	cs.PeerCertificates = append(chain, chain[1], chain[1]) // 4 certificates, the last two alike
	var be *ChainBoundError
	if err := at(chain[0].NotAfter.Add(time.Second)); !errors.As(err, &be) || be.Bound != BoundChainCerts {
		t.Errorf("an expired chain past a bound: %v, want the bound %s crossed", err, BoundChainCerts)
	}
	cs.PeerCertificates = nil
	if err := at(time.Now()); err != nil {
		t.Errorf("no certificate (refused by crypto/tls itself): %v", err)
	}
}
