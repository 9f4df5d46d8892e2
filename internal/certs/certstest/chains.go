package certstest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"fmt"
	"net/url"
)

// The client certificates below test the server's bounds on what a client's
// chain may cost: they are made on demand, in memory, as tls.Certificates
// for a client configuration's Certificates.

// ChainOptions shapes a client chain that ClientChain issues from the CA.
type ChainOptions struct {
	// Intermediates is how many intermediate CAs stand between the CA and
	// the leaf (CA → 1 → 2 → … → leaf); the client sends them after the
	// leaf, the one that signed the leaf first.
	Intermediates int
	// SANs is how many DNS SANs the leaf has beside its URI SAN IdentityURI.
	SANs int
	// IntermediateKey makes the intermediates' keys; nil makes P-256 ones.
	IntermediateKey func() (crypto.Signer, error)
	// Padding adds that many bytes to every certificate of the chain, in an
	// extension no one reads, to make it as large as a test needs.
	Padding int
}

// paddingOID names the padding extension (an arc of the example
// enterprise number, 32473, which RFC 5612 reserves for documentation).
var paddingOID = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 32473, 1}

func (o ChainOptions) pad(tmpl *x509.Certificate) {
	if o.Padding > 0 {
		tmpl.ExtraExtensions = []pkix.Extension{{Id: paddingOID, Value: make([]byte, o.Padding)}}
	}
}

// ClientChainOfSize is ClientChain padded so that the chain's certificates
// add up to at most size bytes, and to within a few bytes of it.
func (p *PKI) ClientChainOfSize(o ChainOptions, size int) (tls.Certificate, error) {
	o.Padding = 0
	for range 8 {
		c, err := p.ClientChain(o)
		if err != nil {
			return tls.Certificate{}, err
		}
		total := 0
		for _, der := range c.Certificate {
			total += len(der)
		}
		n := len(c.Certificate)
		switch {
		case total <= size && size-total < 8*n: // ECDSA signatures vary by a few bytes
			return c, nil
		case total > size:
			o.Padding -= (total-size)/n + 1
		default:
			o.Padding += (size - total) / n
		}
		o.Padding = max(o.Padding, 0)
	}
	return tls.Certificate{}, fmt.Errorf("certstest: no padding makes a chain of %+v %d bytes", o, size)
}

// ClientChain issues a leaf with the identity IdentityURI through
// o.Intermediates intermediates from the CA, so that it verifies against the
// CA.
func (p *PKI) ClientChain(o ChainOptions) (tls.Certificate, error) {
	parent := p.ca
	var sent [][]byte
	for i := range o.Intermediates {
		mk := o.IntermediateKey
		if mk == nil {
			mk = newKey
		}
		key, err := mk()
		if err != nil {
			return tls.Certificate{}, err
		}
		tmpl, err := caTemplate(fmt.Sprintf("monolock test intermediate %d", i+1))
		if err != nil {
			return tls.Certificate{}, err
		}
		o.pad(tmpl)
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent.cert, key.Public(), parent.key)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("certstest: create intermediate %d: %w", i+1, err)
		}
		cert, err := x509.ParseCertificate(der)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("certstest: parse intermediate %d: %w", i+1, err)
		}
		parent = &authority{cert: cert, key: key}
		sent = append([][]byte{der}, sent...)
	}
	tmpl, err := leafTemplate("", x509.ExtKeyUsageClientAuth)
	if err != nil {
		return tls.Certificate{}, err
	}
	o.pad(tmpl)
	u, _ := url.Parse(IdentityURI)
	tmpl.URIs = []*url.URL{u}
	for i := range o.SANs {
		tmpl.DNSNames = append(tmpl.DNSNames, fmt.Sprintf("worker-%04d.dns.local", i))
	}
	leaf, made, err := issue(parent, tmpl)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: append([][]byte{made.der}, sent...), PrivateKey: made.key, Leaf: leaf}, nil
}

// ForgedChain is the chain of an attacker who has no certificate from the
// CA: a leaf that names the CA as its issuer but is signed by a key of its
// own, followed by n self-signed certificates on curve that all carry the
// CA's name, so that crypto/x509 would check the leaf's signature against
// every one of them.
func (p *PKI) ForgedChain(n int, curve elliptic.Curve) (tls.Certificate, error) {
	tmpl, err := caTemplate("")
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl.Subject = p.ca.cert.Subject
	var chain [][]byte
	var forger crypto.Signer
	for i := range n {
		key, err := ecdsa.GenerateKey(curve, rand.Reader)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("certstest: generate key: %w", err)
		}
		if tmpl.SerialNumber, err = serial(); err != nil {
			return tls.Certificate{}, err
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("certstest: create forged CA %d: %w", i+1, err)
		}
		chain = append(chain, der)
		forger = key
	}
	if forger == nil {
		if forger, err = newKey(); err != nil {
			return tls.Certificate{}, err
		}
	}
	leafTmpl, err := leafTemplate("", x509.ExtKeyUsageClientAuth)
	if err != nil {
		return tls.Certificate{}, err
	}
	u, _ := url.Parse(IdentityURI)
	leafTmpl.URIs = []*url.URL{u}
	_, made, err := issue(&authority{cert: tmpl, key: forger}, leafTmpl)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: append([][]byte{made.der}, chain...), PrivateKey: made.key}, nil
}

// P384Key and P521Key make ChainOptions.IntermediateKey keys on those curves.
func P384Key() (crypto.Signer, error) { return ecdsa.GenerateKey(elliptic.P384(), rand.Reader) }
func P521Key() (crypto.Signer, error) { return ecdsa.GenerateKey(elliptic.P521(), rand.Reader) }

// WithCertificate is the client configuration of ClientTLS("") presenting
// cert.
func (p *PKI) WithCertificate(cert tls.Certificate) *tls.Config {
	cfg := p.ClientTLS("")
	cfg.Certificates = []tls.Certificate{cert}
	return cfg
}
