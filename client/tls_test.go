package client

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/monolock/monolock/internal/certs/certstest"
)

// TestTLSDialer: a *tls.Dialer as Config.Dialer gives TLS. A TLS-terminating
// relay stands in front of the plaintext test server.
func TestTLSDialer(t *testing.T) {
	cert, pool := selfSigned(t)
	addr := tlsRelay(t, startServer(t), cert, nil)

	trusting := New(Config{Address: addr, Dialer: &tls.Dialer{Config: &tls.Config{RootCAs: pool}}})
	l, err := trusting.Acquire(testContext(t), "tls", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	// An untrusted certificate is a permanent error, not retried.
	untrusting := New(Config{Address: addr, Dialer: &tls.Dialer{Config: &tls.Config{RootCAs: x509.NewCertPool()}}})
	_, err = untrusting.Acquire(testContext(t), "tls", time.Second)
	var verr *tls.CertificateVerificationError
	if !errors.As(err, &verr) || transient(err) {
		t.Fatalf("Acquire with an untrusted certificate = %v; want a permanent verification error", err)
	}
}

// TestTLSSessionResumption: a Client given a *tls.Dialer without a session
// cache resumes its TLS session on the next connection, and leaves the
// caller's configuration untouched.
func TestTLSSessionResumption(t *testing.T) {
	cert, pool := selfSigned(t)
	resumed := make(chan bool, 4)
	addr := tlsRelay(t, startServer(t), cert, resumed)
	cfg := &tls.Config{RootCAs: pool}
	c := New(Config{Address: addr, Dialer: &tls.Dialer{Config: cfg}})
	for i, want := range []bool{false, true} {
		l, err := c.Acquire(testContext(t), "tls", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		// The lock's reply came after the server's session ticket, so the
		// ticket has been read by the time Acquire returns.
		if got := await(t, resumed, "handshake"); got != want {
			t.Errorf("connection %d: resumed %v, want %v", i, got, want)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if cfg.ClientSessionCache != nil {
		t.Error("New changed the caller's tls.Config")
	}
}

// selfSigned returns a certificate for 127.0.0.1 and a pool that trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "monolock test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// tlsRelay terminates TLS on a loopback port and forwards to target; if
// resumed is not nil, it receives whether each handshake resumed a session.
func tlsRelay(t *testing.T, target string, cert tls.Certificate, resumed chan<- bool) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer in.Close()
				if resumed != nil {
					tc := in.(*tls.Conn)
					if tc.Handshake() != nil {
						return
					}
					resumed <- tc.ConnectionState().DidResume
				}
				out, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer out.Close()
				go func() { _, _ = io.Copy(out, in); _ = out.Close() }()
				_, _ = io.Copy(in, out)
			}()
		}
	}()
	return ln.Addr().String()
}

// TestTLSRefusedByServerNotRetried: a server refusing the client's
// certificate (another CA, expired, none) is not retried: DoRetry stops at
// once, on one connection, with ErrTLSRefused, which names the certificate.
// Under TLS 1.3 the client's handshake completes before the server has
// checked the certificate, so the refusal is an alert on the first read.
func TestTLSRefusedByServerNotRetried(t *testing.T) {
	pki := certstest.NewPKI(t, t.TempDir())
	for _, version := range []uint16{tls.VersionTLS13, tls.VersionTLS12} {
		t.Run(tls.VersionName(version), func(t *testing.T) { testTLSRefused(t, pki, version) })
	}
}

// testTLSRefused is TestTLSRefusedByServerNotRetried with a server of at
// most version: under TLS 1.2 the refusal is an alert during the client's
// handshake, so the dial fails with it.
func testTLSRefused(t *testing.T, pki *certstest.PKI, version uint16) {
	cert, err := tls.LoadX509KeyPair(pki.Server.Cert, pki.Server.Key)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{cert}, ClientCAs: pki.ClientTLS("").RootCAs, ClientAuth: tls.RequireAndVerifyClientCert,
		MaxVersion: version,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer c.Close()
				_ = c.(*tls.Conn).Handshake() // fails: the server sends its alert
			}()
		}
	}()
	for _, name := range []string{certstest.ClientUntrusted, certstest.ClientExpired, ""} {
		accepted.Store(0)
		c := New(Config{Address: ln.Addr().String(), Dialer: &tls.Dialer{Config: pki.ClientTLS(name)}})
		err := c.DoRetry(testContext(t), "mtls", time.Second, func(context.Context, uint64) error {
			t.Fatalf("client certificate %q: granted", name)
			return nil
		})
		if !errors.Is(err, ErrTLSRefused) || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("client certificate %q: DoRetry = %v; want ErrTLSRefused naming the certificate", name, err)
		}
		if n := accepted.Load(); n != 1 {
			t.Errorf("client certificate %q: %d connections, want 1 (not retried)", name, n)
		}
	}
}
