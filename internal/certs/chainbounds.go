package certs

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"time"
)

// A client's certificate chain is the one input of a mutual-TLS handshake
// whose cost the client chooses: crypto/x509 checks a signature for every
// certificate that could be a parent, so a chain of 60 self-signed P-521
// certificates that all carry the client CA's name costs the server 25
// handshakes' worth of CPU before it is refused, and every certificate of an
// accepted chain stays parsed in the session's memory for its life.
//
// crypto/tls offers no hook between parsing the chain and verifying it, so
// the configuration asks for a certificate without verifying it
// (tls.RequireAnyClientCert) and verifies it itself in VerifyConnection,
// which crypto/tls calls before it checks the client's CertificateVerify
// signature: first the bounds below, which cost no signature check, then
// crypto/x509's verification against the client CAs. VerifyConnection also
// runs on every resumed session, so a CA removed by a reload ends resumption
// with it.
//
// The bounds come from what real deployments send: a SPIFFE SVID or a
// cert-manager certificate is a leaf of about 1 KiB with one to a few SANs,
// plus one or two intermediates; an RSA-4096 certificate is under 2 KiB.
const (
	// MaxClientChainCerts is the most certificates a client may send: its
	// leaf and up to three more (two intermediates and, as some clients do,
	// the root).
	MaxClientChainCerts = 4
	// MaxClientCertBytes bounds each certificate's DER encoding.
	MaxClientCertBytes = 4 << 10
	// MaxClientChainBytes bounds the chain's DER encodings together.
	MaxClientChainBytes = 8 << 10
	// MaxClientCertSANs bounds each certificate's subject alternative names
	// (DNS, URI, IP and e-mail together). A SPIFFE SVID has one.
	MaxClientCertSANs = 16
	// MinClientRSABits and MaxClientRSABits bound RSA keys. Verifying with
	// a 4096-bit key costs about 4 P-256 verifications, with an 8192-bit
	// one (which crypto/tls would accept) 15.
	MinClientRSABits = 2048
	MaxClientRSABits = 4096
)

// The bounds a ChainBoundError names, as metrics label them.
const (
	BoundChainCerts = "chain_certificates"
	BoundCertBytes  = "certificate_bytes"
	BoundChainBytes = "chain_bytes"
	BoundSANs       = "sans"
	BoundKey        = "key"
)

// ChainBounds lists the Bound* names.
func ChainBounds() []string {
	return []string{BoundChainCerts, BoundCertBytes, BoundChainBytes, BoundSANs, BoundKey}
}

// ChainBoundError is a client certificate chain refused before
// verification because it crosses one of the bounds above.
type ChainBoundError struct {
	Bound  string // one of the Bound* names
	Detail string // what the chain had, and what the server accepts
}

func (e *ChainBoundError) Error() string {
	return "client certificate chain refused before verification: " + e.Detail
}

// ChainBound names the bound crossed, for the server's metrics and log
// without a dependency on this package.
func (e *ChainBoundError) ChainBound() string { return e.Bound }

// checkChainBounds checks what the chain may cost to verify and to keep,
// without checking any signature.
func checkChainBounds(chain []*x509.Certificate) error {
	if len(chain) > MaxClientChainCerts {
		return &ChainBoundError{BoundChainCerts, fmt.Sprintf("%d certificates, the server accepts at most %d (the leaf and its intermediates); send the leaf and the intermediates up to the client CA only", len(chain), MaxClientChainCerts)}
	}
	total := 0
	for i, c := range chain {
		total += len(c.Raw)
		if len(c.Raw) > MaxClientCertBytes {
			return &ChainBoundError{BoundCertBytes, fmt.Sprintf("certificate %d (%s) is %d bytes, the server accepts at most %d", i+1, describe(c), len(c.Raw), MaxClientCertBytes)}
		}
		if n := len(c.DNSNames) + len(c.URIs) + len(c.IPAddresses) + len(c.EmailAddresses); n > MaxClientCertSANs {
			return &ChainBoundError{BoundSANs, fmt.Sprintf("certificate %d (%s) has %d subject alternative names, the server accepts at most %d; issue the client a certificate with the names it needs", i+1, describe(c), n, MaxClientCertSANs)}
		}
		if err := checkKey(c); err != nil {
			return &ChainBoundError{BoundKey, fmt.Sprintf("certificate %d (%s) %s; the server accepts ECDSA P-256 and P-384, Ed25519 and RSA keys of %d to %d bits", i+1, describe(c), err, MinClientRSABits, MaxClientRSABits)}
		}
	}
	if total > MaxClientChainBytes {
		return &ChainBoundError{BoundChainBytes, fmt.Sprintf("the chain is %d bytes, the server accepts at most %d", total, MaxClientChainBytes)}
	}
	return nil
}

// checkKey accepts the keys whose signatures are cheap to check.
func checkKey(c *x509.Certificate) error {
	switch k := c.PublicKey.(type) {
	case *ecdsa.PublicKey:
		if k.Curve == elliptic.P256() || k.Curve == elliptic.P384() {
			return nil
		}
		return fmt.Errorf("has an ECDSA key on %s", k.Curve.Params().Name)
	case ed25519.PublicKey:
		return nil
	case *rsa.PublicKey:
		if n := k.N.BitLen(); n < MinClientRSABits || n > MaxClientRSABits {
			return fmt.Errorf("has a %d-bit RSA key", n)
		}
		return nil
	}
	return fmt.Errorf("has a %s key", c.PublicKeyAlgorithm)
}

// verifyClientChain is the VerifyConnection of a mutual-TLS configuration
// whose client CAs are roots: the bounds, then crypto/x509's verification,
// as crypto/tls would have done it.
func verifyClientChain(roots *x509.CertPool, now func() time.Time) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		chain := cs.PeerCertificates
		if len(chain) == 0 {
			return nil // tls.RequireAnyClientCert has refused the handshake already
		}
		if err := checkChainBounds(chain); err != nil {
			return err
		}
		opts := x509.VerifyOptions{
			Roots:         roots,
			Intermediates: x509.NewCertPool(),
			CurrentTime:   now(),
			KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}
		for _, c := range chain[1:] {
			opts.Intermediates.AddCert(c)
		}
		if _, err := chain[0].Verify(opts); err != nil {
			return &tls.CertificateVerificationError{UnverifiedCertificates: chain, Err: err}
		}
		return nil
	}
}
