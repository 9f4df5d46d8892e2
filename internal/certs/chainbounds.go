package certs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"errors"
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
// The bounds come from what real deployments send, and from what a session
// costs: a SPIFFE SVID or a cert-manager certificate is a leaf of 0.5 to
// 1.2 KiB with one to a few SANs, sent alone or with one intermediate, two at
// most. crypto/tls keeps about three times the chain's bytes for a session's
// life (its record and handshake buffers grow to the Certificate message, and
// the parsed certificates point into a copy of it), and 2 KiB for each
// certificate parsed, on top of 10.6 KiB for a session with one P-256 leaf
// of 0.5 KiB: at the bounds a session holds 22.9 KiB, 2.2 times that
// (BenchmarkSessionHeap, "chain at the bounds"), where a leaf with 1,000
// SANs held 137 KiB.
const (
	// MaxClientChainCerts is the most certificates a client may send: its
	// leaf and up to two intermediates.
	MaxClientChainCerts = 3
	// MaxClientCertBytes bounds each certificate's DER encoding. An RSA-4096
	// certificate is about 1.4 KiB.
	MaxClientCertBytes = 2 << 10
	// MaxClientChainBytes bounds the chain's DER encodings together: three
	// P-256 certificates, two RSA-2048 ones, or an RSA-4096 leaf with a
	// P-256 intermediate.
	MaxClientChainBytes = 2560
	// MaxClientCertSANs bounds each certificate's subject alternative names
	// (DNS, URI, IP and e-mail together). A SPIFFE SVID has one.
	MaxClientCertSANs = 16
	// MaxClientChainCost bounds the signature checks the chain can make the
	// server do, in units of one P-256 verification (keyCost): every
	// certificate's key is used once, the leaf's for its CertificateVerify,
	// the others' for the certificate below them. 6 holds a chain of three
	// P-256, Ed25519 or RSA-2048/3072 certificates, or one RSA-4096
	// certificate with two of those, and keeps a forged chain's handshake
	// within twice an honest one's CPU.
	MaxClientChainCost = 6
)

// The bounds a ChainBoundError names, as metrics label them.
const (
	BoundChainCerts       = "chain_certificates"
	BoundCertBytes        = "certificate_bytes"
	BoundChainBytes       = "chain_bytes"
	BoundSANs             = "sans"
	BoundDuplicateSubject = "duplicate_subject"
	BoundKey              = "key"
	BoundCost             = "verification_cost"
)

// ChainBounds lists the Bound* names.
func ChainBounds() []string {
	return []string{BoundChainCerts, BoundCertBytes, BoundChainBytes, BoundSANs, BoundDuplicateSubject, BoundKey, BoundCost}
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
//
// crypto/x509 looks for each certificate's parent among the certificates
// whose subject is its issuer, and checks a signature for every one of them:
// a chain whose certificates share a name makes it check each key against
// many certificates. With a subject of their own each, the search is a line
// from the leaf up, and each key checks one signature at most.
func checkChainBounds(chain []*x509.Certificate) error {
	if len(chain) > MaxClientChainCerts {
		return &ChainBoundError{BoundChainCerts, fmt.Sprintf("%d certificates, the server accepts at most %d (the leaf and its intermediates); send the leaf and the intermediates up to the client CA only", len(chain), MaxClientChainCerts)}
	}
	total, cost := 0, 0
	for i, c := range chain {
		total += len(c.Raw)
		if len(c.Raw) > MaxClientCertBytes {
			return &ChainBoundError{BoundCertBytes, fmt.Sprintf("certificate %d (%s) is %d bytes, the server accepts at most %d", i+1, describe(c), len(c.Raw), MaxClientCertBytes)}
		}
		if n := len(c.DNSNames) + len(c.URIs) + len(c.IPAddresses) + len(c.EmailAddresses); n > MaxClientCertSANs {
			return &ChainBoundError{BoundSANs, fmt.Sprintf("certificate %d (%s) has %d subject alternative names, the server accepts at most %d; issue the client a certificate with the names it needs", i+1, describe(c), n, MaxClientCertSANs)}
		}
		for j := 1; j < i; j++ {
			if bytes.Equal(chain[j].RawSubject, c.RawSubject) {
				return &ChainBoundError{BoundDuplicateSubject, fmt.Sprintf("certificates %d and %d have the same subject (%s); send one path from the leaf to the client CA", j+1, i+1, c.Subject)}
			}
		}
		n, err := keyCost(c)
		if err != nil {
			return &ChainBoundError{BoundKey, fmt.Sprintf("certificate %d (%s) %s; the server accepts ECDSA P-256, Ed25519 and RSA keys of %d to %d bits", i+1, describe(c), err, MinClientRSABits, MaxClientRSABits)}
		}
		cost += n
	}
	if total > MaxClientChainBytes {
		return &ChainBoundError{BoundChainBytes, fmt.Sprintf("the chain is %d bytes, the server accepts at most %d", total, MaxClientChainBytes)}
	}
	if cost > MaxClientChainCost {
		return &ChainBoundError{BoundCost, fmt.Sprintf("the chain's keys cost %d P-256 verifications to check, the server accepts at most %d (P-256, Ed25519 and RSA up to 3072 bits cost 1, RSA-4096 4); use P-256 or Ed25519 keys", cost, MaxClientChainCost)}
	}
	return nil
}

// The RSA keys accepted. Verifying with an 8192-bit key, which crypto/tls
// would accept, costs about 15 P-256 verifications.
const (
	MinClientRSABits = 2048
	MaxClientRSABits = 4096
)

// keyCost is what a signature check with c's key costs, in P-256
// verifications (measured with crypto/x509 on Go 1.26, amd64), or why the key
// is refused.
func keyCost(c *x509.Certificate) (int, error) {
	switch k := c.PublicKey.(type) {
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			return 1, nil
		case elliptic.P384():
			// 12 P-256 verifications: more than a whole chain may cost.
			return 0, errors.New("has an ECDSA P-384 key (a P-384 signature costs the server 12 P-256 ones)")
		}
		return 0, fmt.Errorf("has an ECDSA key on %s", k.Curve.Params().Name)
	case ed25519.PublicKey:
		return 1, nil
	case *rsa.PublicKey:
		switch n := k.N.BitLen(); {
		case n < MinClientRSABits || n > MaxClientRSABits:
			return 0, fmt.Errorf("has a %d-bit RSA key", n)
		case n <= 3072:
			return 1, nil
		}
		return 4, nil
	}
	return 0, fmt.Errorf("has a %s key", c.PublicKeyAlgorithm)
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
