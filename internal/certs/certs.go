// Package certs loads the TLS material of monolock's protocol port: the
// server certificate and key (-tls-cert, -tls-key) and, for mutual TLS, the
// pool of CAs that sign client certificates (-tls-client-ca). A Reloader
// rereads the files on SIGHUP without disturbing live sessions, and Identity
// names the client of a mutual-TLS connection.
//
// Errors name the file at fault and say what to do, so that the server can
// print them as its one line before exiting with status 2.
package certs

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/monolock/monolock/internal/conffile"
)

// Files names the PEM files of the TLS material.
type Files struct {
	// Cert is the server certificate, optionally followed by the
	// intermediate certificates that lead to the client's trusted root.
	Cert string
	// Key is the unencrypted private key of Cert (PKCS #8, PKCS #1 or SEC 1).
	Key string
	// ClientCA holds the CA certificates that client certificates must
	// verify against. Empty: no client certificates are asked for (plain
	// TLS, every client's identity is empty).
	ClientCA string
	// TicketKeys is a session-ticket key file (see LoadTicketKeys). Empty:
	// crypto/tls makes its own keys, which die with the process, so a
	// restarted server, or the other member of a pair, cannot resume
	// sessions it did not start.
	TicketKeys string
}

// Load reads and checks the files and returns the server configuration:
// TLS 1.2 or later with the certificate; with ClientCA, every client must
// present a certificate chain within the bounds of chainbounds.go that
// verifies against those CAs (tls.RequireAnyClientCert, verified by
// VerifyConnection). The caller may not modify the result once it is in use.
func Load(f Files) (*tls.Config, error) {
	if f.Cert == "" || f.Key == "" {
		return nil, errors.New("TLS needs both a certificate file and its key file (-tls-cert and -tls-key); give both, or neither for plain TCP")
	}
	cert, err := loadKeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
	}
	if f.ClientCA != "" {
		pool, err := loadPool(f.ClientCA)
		if err != nil {
			return nil, err
		}
		// ClientCAs is still set: crypto/tls names these CAs in its
		// certificate request, so that clients pick the certificate they sign.
		cfg.ClientAuth = tls.RequireAnyClientCert
		cfg.ClientCAs = pool
		cfg.VerifyConnection = verifyClientChain(pool, time.Now)
	}
	return cfg, nil
}

// loadKeyPair reads a certificate chain and its private key, and checks that
// they belong together and that the certificate is still valid.
func loadKeyPair(certPath, keyPath string) (tls.Certificate, error) {
	certPEM, err := readFile("certificate file", certPath)
	if err != nil {
		return tls.Certificate{}, err
	}
	keyPEM, err := readFile("key file", keyPath)
	if err != nil {
		return tls.Certificate{}, err
	}
	chain, err := parseCertificates("certificate file", certPath, certPEM)
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf := chain[0]
	key, err := parseKey(keyPath, keyPEM)
	if err != nil {
		return tls.Certificate{}, err
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(leaf.PublicKey) {
		return tls.Certificate{}, fmt.Errorf("cert and key do not match: the key in %s is not the private key of the certificate in %s; use the key that was generated with that certificate", keyPath, certPath)
	}
	if now := time.Now(); now.After(leaf.NotAfter) {
		return tls.Certificate{}, fmt.Errorf("certificate in %s (%s) expired at %s; renew it", certPath, describe(leaf), leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	out := tls.Certificate{PrivateKey: key, Leaf: leaf}
	for _, c := range chain {
		out.Certificate = append(out.Certificate, c.Raw)
	}
	return out, nil
}

// loadPool reads the client CA file into a pool.
func loadPool(path string) (*x509.CertPool, error) {
	data, err := readFile("client CA file", path)
	if err != nil {
		return nil, err
	}
	certs, err := parseCertificates("client CA file", path, data)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

// MaxFileSize caps every file of TLS material (certificate, key, client CA
// bundle, session-ticket keys), in bytes: a bundle of every public root CA
// is a quarter of it. A larger file, or a path that names no regular file (a
// FIFO, a device), is refused before it is read, at start and on SIGHUP.
const MaxFileSize = 1 << 20

// readFile reads a file, naming it in the error with a hint.
func readFile(kind, path string) ([]byte, error) {
	data, err := conffile.Read(path, MaxFileSize)
	if err == nil {
		return data, nil
	}
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		return nil, fmt.Errorf("%s %s: %w", kind, path, err)
	}
	hint := ""
	switch {
	case errors.Is(err, fs.ErrNotExist):
		hint = "; check the path"
	case errors.Is(err, fs.ErrPermission):
		hint = "; the server's user must be able to read it"
	}
	return nil, fmt.Errorf("%s %s: %w%s", kind, path, pe.Err, hint)
}

// parseCertificates returns every CERTIFICATE block of a PEM file, parsed;
// it fails when there is none or one does not parse.
func parseCertificates(kind, path string, data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	var others []string
	blocks, err := pemBlocks(kind, path, data)
	if err != nil {
		return nil, err
	}
	for _, b := range blocks {
		if b.Type != "CERTIFICATE" {
			others = append(others, b.Type)
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s %s: certificate %d does not parse: %v; replace it with a valid PEM certificate", kind, path, len(certs)+1, err)
		}
		certs = append(certs, c)
	}
	if len(certs) > 0 {
		return certs, nil
	}
	msg := fmt.Sprintf("no certificates found in PEM file %s (the %s): expected a -----BEGIN CERTIFICATE----- block", path, kind)
	if len(others) > 0 {
		msg += fmt.Sprintf(", found only %s", strings.Join(others, ", "))
		if strings.HasSuffix(others[0], "PRIVATE KEY") {
			msg += " (is a key file given where a certificate belongs?)"
		}
	}
	return nil, errors.New(msg)
}

// parseKey returns the first private key of a PEM file.
func parseKey(path string, data []byte) (crypto.Signer, error) {
	var others []string
	blocks, err := pemBlocks("key file", path, data)
	if err != nil {
		return nil, err
	}
	for _, b := range blocks {
		if !strings.HasSuffix(b.Type, "PRIVATE KEY") {
			others = append(others, b.Type)
			continue
		}
		if b.Type == "ENCRYPTED PRIVATE KEY" || strings.Contains(b.Headers["Proc-Type"], "ENCRYPTED") {
			return nil, fmt.Errorf("key file %s is encrypted; the server needs an unencrypted key (decrypt it with: openssl pkey -in %s -out KEY.pem) and must be the only reader of it", path, path)
		}
		key, err := parsePrivateKey(b)
		if err != nil {
			return nil, fmt.Errorf("key file %s: the %s block does not parse: %v; give an unencrypted PKCS #8, PKCS #1 or EC private key", path, b.Type, err)
		}
		return key, nil
	}
	msg := fmt.Sprintf("no private key found in PEM file %s (the key file): expected a -----BEGIN PRIVATE KEY----- block", path)
	if len(others) > 0 {
		msg += fmt.Sprintf(", found only %s", strings.Join(others, ", "))
		if others[0] == "CERTIFICATE" {
			msg += " (is a certificate given where the key belongs?)"
		}
	}
	return nil, errors.New(msg)
}

// pemBlocks returns every PEM block of a file and fails when anything but
// white space follows the last complete block. A file caught half-written (a
// block cut before its END line, which pem.Decode would silently skip) must be
// refused, so that a reload keeps the previous material instead of loading a
// bundle that lacks its last certificate. Text before or between blocks, as
// openssl writes it, is allowed; a file without any block is left to the
// caller's "none found" message.
func pemBlocks(kind, path string, data []byte) ([]*pem.Block, error) {
	var blocks []*pem.Block
	rest := data
	for {
		b, r := pem.Decode(rest)
		if b == nil {
			break
		}
		blocks, rest = append(blocks, b), r
	}
	left := bytes.TrimSpace(rest)
	cut := bytes.Contains(left, []byte("-----BEGIN"))
	// A file with no block at all gets the caller's "none found" message.
	if len(left) > 0 && (len(blocks) > 0 || cut) {
		what := "text that is not a complete PEM block"
		if cut {
			what = "a PEM block with no END line"
		}
		return nil, fmt.Errorf("%s %s: %s after the last complete block (%d bytes; was the file read while being written?); fix or rewrite the file", kind, path, what, len(left))
	}
	return blocks, nil
}

func parsePrivateKey(b *pem.Block) (crypto.Signer, error) {
	var key any
	var err error
	switch b.Type {
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(b.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(b.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(b.Bytes)
	}
	if err != nil {
		return nil, err
	}
	switch k := key.(type) {
	case *rsa.PrivateKey:
		return k, nil
	case *ecdsa.PrivateKey:
		return k, nil
	case ed25519.PrivateKey:
		return k, nil
	}
	return nil, fmt.Errorf("unsupported key type %T", key)
}

// describe names a certificate for an error message.
func describe(c *x509.Certificate) string {
	if id := leafIdentity(c); id != "" {
		return id
	}
	return "serial " + c.SerialNumber.String()
}

// Reloader holds the current TLS material and rereads it on demand (SIGHUP).
// It is safe for concurrent use.
//
// Session-ticket keys live on ServerConfig, the configuration every
// handshake starts from: crypto/tls takes the keys from there unless the
// per-handshake configuration sets its own, which these do not.
type Reloader struct {
	files  Files
	mu     sync.Mutex // serialises Reload
	cur    atomic.Pointer[tls.Config]
	server *tls.Config
}

// NewReloader loads the files once (see Load) and fails if they are bad.
func NewReloader(f Files) (*Reloader, error) {
	cfg, err := Load(f)
	if err != nil {
		return nil, err
	}
	r := &Reloader{files: f}
	r.cur.Store(cfg)
	r.server = &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return r.cur.Load(), nil
		},
	}
	if f.TicketKeys != "" {
		keys, err := LoadTicketKeys(f.TicketKeys)
		if err != nil {
			return nil, err
		}
		r.server.SetSessionTicketKeys(keys)
	}
	return r, nil
}

// ReloadTicketKeys rereads the session-ticket key file and returns how many
// keys it holds. On an error the previous keys stay in use. Without a key
// file it does nothing. A ticket sealed with a key that is no longer in the
// file is not an error: that client simply gets a full handshake.
func (r *Reloader) ReloadTicketKeys() (int, error) {
	if r.files.TicketKeys == "" {
		return 0, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	keys, err := LoadTicketKeys(r.files.TicketKeys)
	if err != nil {
		return 0, err
	}
	r.server.SetSessionTicketKeys(keys)
	return len(keys), nil
}

// Reload rereads every file. If anything fails, the previous good material
// stays in use and the error says why; otherwise new handshakes use the new
// material from now on. Connections already established are not affected.
func (r *Reloader) Reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	cfg, err := Load(r.files)
	if err != nil {
		return err
	}
	r.cur.Store(cfg)
	return nil
}

// ServerConfig is the configuration to serve with: its GetConfigForClient
// returns the material current at each handshake, so new connections see
// what the last successful Reload loaded while live sessions carry on. It
// returns the same *tls.Config on every call; do not modify it.
func (r *Reloader) ServerConfig() *tls.Config { return r.server }

// Current is the material new handshakes use now. Do not modify it.
func (r *Reloader) Current() *tls.Config { return r.cur.Load() }

// Files is what the Reloader reads.
func (r *Reloader) Files() Files { return r.files }

// Identity is the client identity of a connection served with a
// configuration from Load (or a Reloader): of the client's certificate, the
// first URI SAN, else the first DNS SAN, else the Subject Common Name; ""
// without a client certificate. Such a configuration completes no handshake
// whose chain does not verify against the client CAs, so every certificate
// Identity sees there has been verified (by Load's VerifyConnection, so
// crypto/tls reports no VerifiedChains). Do not use it with a configuration
// that does not verify client certificates: it would name unverified ones.
//
// A resumed session has the same identity as the full handshake that made
// its ticket: crypto/tls seals the client's certificates into the ticket and
// restores them on resumption, after checking that the leaf has not expired;
// Load's VerifyConnection then verifies the chain again against the client
// CAs current at resumption (so a CA removed by a reload ends resumption
// with it, and the client falls back to a full handshake).
func Identity(cs tls.ConnectionState) string {
	if len(cs.PeerCertificates) == 0 {
		return ""
	}
	return leafIdentity(cs.PeerCertificates[0])
}

func leafIdentity(c *x509.Certificate) string {
	switch {
	case len(c.URIs) > 0:
		return c.URIs[0].String()
	case len(c.DNSNames) > 0:
		return c.DNSNames[0]
	}
	return c.Subject.CommonName
}
