package conformance

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"regexp"
	"time"

	"github.com/monolock/monolock/internal/certs/certstest"
)

func tlsScenarios() []Scenario {
	return []Scenario{
		{Name: "tls-silent-acquire", Rule: "rule 8 over TLS: ACQUIRE unanswered after the handshake: give up at 0.8 × lease and close", run: overTLS(giveUpAcquire)},
		{Name: "tls-silent-holding", Rule: "rule 8, give-up over TLS: heartbeat unanswered: lost at 0.8 × lease, closed once the work stopped", run: overTLS(giveUpHolding)},
		{Name: "tls-certificate-refused", Rule: "rule 6 over TLS: a handshake refused by certificate verification, on either side, is a client error: reported, not retried", run: tlsCertificateRefused},
	}
}

// tlsSetup is a TLS scenario's certificates: the fake servers' configuration
// and the files a driver gets.
type tlsSetup struct {
	pki    *certstest.PKI
	server *tls.Config
	client TLSFiles
}

// newTLS makes a throwaway CA, a server certificate for localhost and
// 127.0.0.1 and client certificates (internal/certs/certstest) in a
// temporary directory, removed with the scenario. The server asks for a
// client certificate only when clientAuth says so.
func (e *Env) newTLS(clientAuth tls.ClientAuthType) *tlsSetup {
	dir, err := os.MkdirTemp("", "monolock-conformance-tls-")
	e.must("kit: TLS files", err)
	e.dirs = append(e.dirs, dir)
	pki, err := certstest.Generate(dir)
	e.must("kit: TLS files", err)
	cert, err := tls.LoadX509KeyPair(pki.Server.Cert, pki.Server.Key)
	e.must("kit: TLS files", err)
	pem, err := os.ReadFile(pki.CA)
	e.must("kit: TLS files", err)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return &tlsSetup{
		pki:    pki,
		server: &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: clientAuth, MinVersion: tls.VersionTLS12},
		client: TLSFiles{CAFile: pki.CA, ServerName: certstest.ServerName},
	}
}

// overTLS runs a scenario with every fake server speaking TLS (no client
// certificate asked) and the judged client connecting with TLS: the client
// rules hold over TLS as over TCP.
func overTLS(run func(*Env)) func(*Env) {
	return func(e *Env) {
		e.tls = e.newTLS(tls.NoClientCert)
		run(e)
	}
}

// certificateProblem is what a report of a refused certificate names.
var certificateProblem = regexp.MustCompile(`(?i)certif`)

// tlsCertificateRefused: run mode (the retrying helper), one session per
// case: the server (mutual TLS against the CA) refuses a client certificate
// from another CA, an expired one and none at all, and an expired one with
// TLS 1.2 at most (where the refusal comes during the client's handshake;
// under TLS 1.3 it comes after it); the client refuses a server certificate
// its CA did not sign. Each time the helper must stop
// with `unavailable` whose reason names the certificate problem, and open
// no second connection within 700 ms (a retrying client reconnects within
// its first backoff, about 100 ms). The kit also checks that no request
// came through and, when it refuses, that its handshake failed, so that each
// case is what it says.
func tlsCertificateRefused(e *Env) {
	const rule = "rule 6 over TLS (a refused certificate is a client error: reported, not retried)"
	setup := e.newTLS(tls.RequireAndVerifyClientCert)
	trusted := setup.client
	withClient := func(name string) *TLSFiles {
		f := trusted
		pair := setup.pki.Clients[name]
		f.CertFile, f.KeyFile = pair.Cert, pair.Key
		return &f
	}
	otherCA := trusted
	otherCA.CAFile = setup.pki.OtherCA
	otherCA.CertFile, otherCA.KeyFile = withClient(certstest.ClientURI).CertFile, withClient(certstest.ClientURI).KeyFile
	tls12 := setup.server.Clone()
	tls12.MaxVersion = tls.VersionTLS12 // the refusal comes during the client's handshake, not after it
	for _, tc := range []struct {
		what          string
		files         *TLSFiles
		server        *tls.Config
		serverRefuses bool
	}{
		{"the server refuses a client certificate from another CA", withClient(certstest.ClientUntrusted), setup.server, true},
		{"the server refuses an expired client certificate", withClient(certstest.ClientExpired), setup.server, true},
		{"the server refuses a client without a certificate", &trusted, setup.server, true},
		{"the server, TLS 1.2 at most, refuses an expired client certificate", withClient(certstest.ClientExpired), tls12, true},
		{"the client refuses a server certificate its CA did not sign", &otherCA, setup.server, false},
	} {
		f, err := Listen(tc.server)
		e.must("kit", err)
		e.fakes = append(e.fakes, f)
		req := NewRequest(f.Addr(), "tls-refused", 2*time.Second)
		req.Mode = ModeRun
		req.TLS = tc.files
		p := e.StartJudged(req)
		c, err := f.Next(safety)
		e.must("connect", err)
		_, how, err := c.WaitEnd(safety)
		e.must(fmt.Sprintf("%s (%s)", rule, tc.what), err)
		// The case is a refusal: no request came through, and when the kit
		// refuses, its handshake failed (a client that refuses may verify
		// after the handshake and just close, as Node.js does).
		if len(c.Log()) > 0 || (tc.serverRefuses && how == nil) {
			e.Failf("kit", "%s: %d request(s) read, the kit's handshake error %v: the case tests no refusal", tc.what, len(c.Log()), how)
		}
		ev, err := p.Next(safety)
		e.must(fmt.Sprintf("%s (%s)", rule, tc.what), err)
		if ev.Event != "unavailable" {
			e.Failf(rule, "%s: the driver printed %s, want an unavailable event", tc.what, ev)
		}
		if !certificateProblem.MatchString(ev.Reason) {
			e.Failf("errors say what was wrong", "%s: the reason %q does not name the certificate problem", tc.what, ev.Reason)
		}
		time.Sleep(700 * time.Millisecond)
		if n := f.Accepted(); n != 1 {
			e.Failf(rule, "%s: %d connections, want 1 (the helper retried)", tc.what, n)
		}
		p.Close()
	}
}
