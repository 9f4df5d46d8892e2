// Package certstest makes a throwaway public-key infrastructure for tests:
// a CA, a server certificate for localhost and 127.0.0.1, and client
// certificates with each kind of identity monolock derives (URI SAN, DNS SAN,
// Common Name), plus one from a CA the server does not trust. Everything is
// made with crypto/x509, no external tools, and written as PEM files.
//
// It is test support: NewPKI and RotateServer report failures through
// testing.TB, Generate returns them (for the benchmark harness); it must not
// be imported by production code.
package certstest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"
)

// Names of the client certificates NewPKI makes, for PKI.ClientTLS and
// PKI.Clients.
const (
	ClientURI       = "uri"       // URI SAN IdentityURI only
	ClientDNS       = "dns"       // DNS SAN IdentityDNS only, empty subject
	ClientCN        = "cn"        // Common Name IdentityCN only, no SAN
	ClientAll       = "all"       // URI SAN IdentityAll, DNS SAN "all.dns.local", CN "all-cn"
	ClientDNSCN     = "dnscn"     // DNS SAN IdentityDNSCN and CN "dnscn-cn"
	ClientUntrusted = "untrusted" // URI SAN IdentityURI, signed by the other CA
	ClientExpired   = "expired"   // URI SAN IdentityURI, signed by the CA, expired an hour ago
)

// The identities the server derives from the client certificates (the first
// URI SAN, else the first DNS SAN, else the Common Name).
const (
	IdentityURI   = "spiffe://lab/worker/7"
	IdentityDNS   = "worker.dns.local"
	IdentityCN    = "cn-worker"
	IdentityAll   = "spiffe://lab/worker/all" // the URI SAN wins over DNS SAN and CN
	IdentityDNSCN = "dnscn.dns.local"         // the DNS SAN wins over the CN
)

// ServerName is the DNS name in the server certificate (it also has the IP
// SANs 127.0.0.1 and ::1). ClientTLS sets it as the name to verify, so the
// configs work over net.Pipe and over loopback alike.
const ServerName = "localhost"

// Pair is the paths of a certificate's PEM file and of its key's PEM file.
type Pair struct {
	Cert, Key string
}

// PKI is the set of files NewPKI (or Generate) wrote. Paths are absolute when dir is.
type PKI struct {
	Dir string

	// CA is the PEM certificate of the CA that signs the server and the
	// trusted clients: the server's client CA (-tls-client-ca) and the
	// clients' -tls-ca. CAKey is its private key.
	CA, CAKey string
	// OtherCA is the PEM certificate of a second CA, which nothing trusts;
	// it signs ClientUntrusted.
	OtherCA string
	// Server is the server certificate (-tls-cert) and key (-tls-key).
	Server Pair
	// Clients maps the Client* names to their files.
	Clients map[string]Pair

	mu         sync.Mutex
	ca, other  *authority
	serverLeaf *x509.Certificate
	pool       *x509.CertPool
}

type authority struct {
	cert *x509.Certificate
	key  crypto.Signer
}

// NewPKI makes a CA, a second (untrusted) CA, a server certificate and the
// client certificates, and writes them into dir (which must exist) as
// ca.pem, ca-key.pem, other-ca.pem, server.pem, server-key.pem and
// client-NAME.pem, client-NAME-key.pem for each Client* name. It is Generate
// with failures reported through t.
func NewPKI(t testing.TB, dir string) *PKI {
	t.Helper()
	p, err := Generate(dir)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Generate is NewPKI for code that has no testing.TB (the benchmark
// harness): it writes the same files and returns the first failure.
func Generate(dir string) (*PKI, error) {
	p := &PKI{
		Dir:     dir,
		CA:      filepath.Join(dir, "ca.pem"),
		CAKey:   filepath.Join(dir, "ca-key.pem"),
		OtherCA: filepath.Join(dir, "other-ca.pem"),
		Server:  Pair{Cert: filepath.Join(dir, "server.pem"), Key: filepath.Join(dir, "server-key.pem")},
		Clients: map[string]Pair{},
	}
	var err error
	if p.ca, err = newAuthority("monolock test CA"); err != nil {
		return nil, err
	}
	if p.other, err = newAuthority("monolock untrusted test CA"); err != nil {
		return nil, err
	}
	if err := writePEM(p.CA, "CERTIFICATE", p.ca.cert.Raw); err != nil {
		return nil, err
	}
	if err := writeKey(p.CAKey, p.ca.key); err != nil {
		return nil, err
	}
	if err := writePEM(p.OtherCA, "CERTIFICATE", p.other.cert.Raw); err != nil {
		return nil, err
	}
	p.pool = x509.NewCertPool()
	p.pool.AddCert(p.ca.cert)

	if _, err := p.rotateServer(); err != nil {
		return nil, err
	}

	now := time.Now()
	clients := []struct {
		name        string
		issuer      *authority
		cn          string
		dns, uris   []string
		expiredCert bool
	}{
		{name: ClientURI, issuer: p.ca, uris: []string{IdentityURI}},
		{name: ClientDNS, issuer: p.ca, dns: []string{IdentityDNS}},
		{name: ClientCN, issuer: p.ca, cn: IdentityCN},
		{name: ClientAll, issuer: p.ca, cn: "all-cn", dns: []string{"all.dns.local"}, uris: []string{IdentityAll}},
		{name: ClientDNSCN, issuer: p.ca, cn: "dnscn-cn", dns: []string{IdentityDNSCN}},
		{name: ClientUntrusted, issuer: p.other, uris: []string{IdentityURI}},
		{name: ClientExpired, issuer: p.ca, uris: []string{IdentityURI}, expiredCert: true},
	}
	for _, c := range clients {
		tmpl, err := leafTemplate(c.cn, x509.ExtKeyUsageClientAuth)
		if err != nil {
			return nil, err
		}
		tmpl.DNSNames = c.dns
		for _, u := range c.uris {
			parsed, err := url.Parse(u)
			if err != nil {
				return nil, fmt.Errorf("certstest: URI SAN %q: %w", u, err)
			}
			tmpl.URIs = append(tmpl.URIs, parsed)
		}
		if c.expiredCert {
			tmpl.NotBefore, tmpl.NotAfter = now.Add(-2*time.Hour), now.Add(-time.Hour)
		}
		_, made, err := issue(c.issuer, tmpl)
		if err != nil {
			return nil, err
		}
		pair := Pair{
			Cert: filepath.Join(dir, "client-"+c.name+".pem"),
			Key:  filepath.Join(dir, "client-"+c.name+"-key.pem"),
		}
		if err := writePEM(pair.Cert, "CERTIFICATE", made.der); err != nil {
			return nil, err
		}
		if err := writeKey(pair.Key, made.key); err != nil {
			return nil, err
		}
		p.Clients[c.name] = pair
	}
	return p, nil
}

// ClientNames lists the names in Clients, sorted.
func (p *PKI) ClientNames() []string {
	names := make([]string, 0, len(p.Clients))
	for n := range p.Clients {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ClientTLS is a client configuration that trusts the CA, verifies the
// server as ServerName and, unless name is empty, presents the client
// certificate name (one of the Client* constants). It panics on an unknown
// name. The files are read now, so a config made before a rotation keeps the
// old client certificate.
func (p *PKI) ClientTLS(name string) *tls.Config {
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		RootCAs:    p.pool,
		ServerName: ServerName,
	}
	if name == "" {
		return cfg
	}
	pair, ok := p.Clients[name]
	if !ok {
		panic("certstest: no client certificate named " + name)
	}
	cert, err := tls.LoadX509KeyPair(pair.Cert, pair.Key)
	if err != nil {
		panic("certstest: " + err.Error())
	}
	cfg.Certificates = []tls.Certificate{cert}
	return cfg
}

// ServerLeaf is the server certificate NewPKI or the last RotateServer wrote.
func (p *PKI) ServerLeaf() *x509.Certificate {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.serverLeaf
}

// RotateServer issues a new server certificate with a new key from the same
// CA and overwrites Server.Cert and Server.Key with it (key first, then the
// certificate, each by an atomic rename). It returns the new certificate.
// Between the two renames the files do not match; a reload that reads them
// then fails, which a reloader must survive.
func (p *PKI) RotateServer(t testing.TB) *x509.Certificate {
	t.Helper()
	leaf, err := p.rotateServer()
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

func (p *PKI) rotateServer() (*x509.Certificate, error) {
	tmpl, err := leafTemplate("monolock test server", x509.ExtKeyUsageServerAuth)
	if err != nil {
		return nil, err
	}
	tmpl.DNSNames = []string{ServerName}
	tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	leaf, made, err := issue(p.ca, tmpl)
	if err != nil {
		return nil, err
	}
	if err := writeKey(p.Server.Key, made.key); err != nil {
		return nil, err
	}
	if err := writePEM(p.Server.Cert, "CERTIFICATE", made.der); err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.serverLeaf = leaf
	p.mu.Unlock()
	return leaf, nil
}

// issued is a fresh certificate and its key.
type issued struct {
	der []byte
	key crypto.Signer
}

func newKey() (crypto.Signer, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("certstest: generate key: %w", err)
	}
	return k, nil
}

func serial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("certstest: serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}

func newAuthority(cn string) (*authority, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	tmpl, err := caTemplate(cn)
	if err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("certstest: create CA %q: %w", cn, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("certstest: parse CA %q: %w", cn, err)
	}
	return &authority{cert: cert, key: key}, nil
}

// template is a certificate valid from an hour ago for a day, with a fresh
// serial number.
func template(cn string) (*x509.Certificate, error) {
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
	}, nil
}

func caTemplate(cn string) (*x509.Certificate, error) {
	t, err := template(cn)
	if err != nil {
		return nil, err
	}
	t.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	t.BasicConstraintsValid, t.IsCA = true, true
	return t, nil
}

func leafTemplate(cn string, usage x509.ExtKeyUsage) (*x509.Certificate, error) {
	t, err := template(cn)
	if err != nil {
		return nil, err
	}
	t.KeyUsage = x509.KeyUsageDigitalSignature
	t.ExtKeyUsage = []x509.ExtKeyUsage{usage}
	return t, nil
}

func issue(ca *authority, tmpl *x509.Certificate) (*x509.Certificate, issued, error) {
	key, err := newKey()
	if err != nil {
		return nil, issued{}, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, issued{}, fmt.Errorf("certstest: create certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, issued{}, fmt.Errorf("certstest: parse certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	return cert, issued{der: der, key: key}, nil
}

func writeKey(path string, key crypto.Signer) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("certstest: marshal key: %w", err)
	}
	return writePEM(path, "PRIVATE KEY", der)
}

// writePEM writes one PEM block to path through a temporary file and a
// rename, so a reader sees the old file or the new one, never half of one.
func writePEM(path, blockType string, der []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("certstest: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("certstest: %w", err)
	}
	return nil
}

// ClientTLSFromFiles is ClientTLS for a process that has only the PKI's
// files (a child a harness starts): it trusts the CA in ca, verifies the
// server as ServerName and presents the certificate in cert and key.
func ClientTLSFromFiles(ca, cert, key string) (*tls.Config, error) {
	pem, err := os.ReadFile(ca)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no certificate in %s", ca)
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, ServerName: ServerName, Certificates: []tls.Certificate{pair}}, nil
}
