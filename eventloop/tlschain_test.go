package eventloop_test

import (
	"crypto/elliptic"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/monolock/monolock/eventloop"
	"github.com/monolock/monolock/internal/certs"
	"github.com/monolock/monolock/internal/certs/certstest"
	"github.com/monolock/monolock/internal/metrics"
	"github.com/monolock/monolock/internal/testsupport/poll"
	"github.com/monolock/monolock/internal/testsupport/wire"
	"github.com/monolock/monolock/protocol"
)

// lineWriter hands each log line to a channel, so that a test can await it.
type lineWriter chan string

func (w lineWriter) Write(p []byte) (int, error) {
	w <- string(p)
	return len(p), nil
}

// chainRefusals reads monolock_tls_client_chains_refused_total{bound}.
func chainRefusals(t *testing.T, reg *prometheus.Registry, bound string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "monolock_tls_client_chains_refused_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "bound" && l.GetValue() == bound {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no series monolock_tls_client_chains_refused_total{bound=%q}", bound)
	return 0
}

// Over real sockets, through the loop: a client whose chain crosses a bound
// reads the bad-certificate alert and the connection ends; the server counts
// it by bound and logs, at warning level, which bound. A client with a
// chain at the bounds gets its lock on the same server.
func TestTLSChainPastABoundIsRefused(t *testing.T) {
	pki := certstest.NewPKI(t, t.TempDir())
	cfg, err := certs.Load(certs.Files{Cert: pki.Server.Cert, Key: pki.Server.Key, ClientCA: pki.CA})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	lines := make(lineWriter, 64)
	ts := startServerConfig(t, eventloop.Config{
		ListenAddress: "127.0.0.1:0",
		Logger:        zerolog.New(lines).Level(zerolog.WarnLevel),
		Metrics:       metrics.New(reg),
		TLS:           cfg,
		Identity:      certs.Identity,
	})
	// Six certificates fit in a client's last flight (eventloop.MaxClientFlight):
	// crypto/tls parses them and the bounds refuse them.
	forged, err := pki.ForgedChain(5, elliptic.P521())
	if err != nil {
		t.Fatal(err)
	}
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		err := handshakeWith(t, ts, pki, forged, version)
		if err == nil || err == io.EOF || !strings.Contains(err.Error(), "bad certificate") {
			t.Fatalf("TLS %x: a forged chain of 6 certificates got %v, want the bad-certificate alert", version, err)
		}
		if version != tls.VersionTLS12 {
			continue // the log is sampled, one line a second: only the first refusal is sure to be logged
		}
		select {
		case line := <-lines:
			var entry struct{ Level, Bound, Error string }
			if err := json.Unmarshal([]byte(line), &entry); err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			if entry.Level != "warn" || entry.Bound != certs.BoundChainCerts || !strings.Contains(entry.Error, "6 certificates") {
				t.Errorf("logged %s; want a warning naming the bound %s and the 6 certificates", line, certs.BoundChainCerts)
			}
		case <-time.After(safety):
			t.Fatal("no log line for the refused chain")
		}
	}
	// The metric counts every refusal (the loop counts it after the
	// handshake's goroutine has sent the alert).
	poll.Eventually(t, safety, func() error {
		if got := chainRefusals(t, reg, certs.BoundChainCerts); got != 2 {
			return fmt.Errorf("chains refused for %s: %v, want 2", certs.BoundChainCerts, got)
		}
		return nil
	})
	atLimit, err := pki.ClientChain(certstest.ChainOptions{Intermediates: certs.MaxClientChainCerts - 1, SANs: certs.MaxClientCertSANs - 1})
	if err != nil {
		t.Fatal(err)
	}
	c := wire.MustDial(t, ts.Addr().String(), wire.Options{TLS: pki.WithCertificate(atLimit), Safety: safety})
	c.Send(protocol.AppendAcquire(nil, longLease, "at-the-bounds"))
	c.Expect(protocol.TypeAcquired)
}

// Over real sockets: a last flight larger than eventloop.MaxClientFlight (here 61
// forged certificates, which crypto/tls would parse one by one before any
// bound could refuse them) ends the connection as it arrives, in TLS 1.2
// and 1.3, and the next honest client gets its lock.
func TestTLSFlightPastTheBoundIsClosed(t *testing.T) {
	ts, pki := startTLSServer(t, 0, 0)
	forged, err := pki.ForgedChain(60, elliptic.P521())
	if err != nil {
		t.Fatal(err)
	}
	if size := chainBytes(forged); size <= eventloop.MaxClientFlight {
		t.Fatalf("the forged chain is %d bytes, not past the bound of %d", size, eventloop.MaxClientFlight)
	}
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		err := handshakeWith(t, ts, pki, forged, version)
		if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("TLS %x: a last flight of %d bytes got %v, want the connection ended", version, chainBytes(forged), err)
		}
	}
	c := dialTLS(t, ts, pki)
	c.Send(protocol.AppendAcquire(nil, longLease, "after-the-forged-flights"))
	c.Expect(protocol.TypeAcquired)
}

// handshakeWith runs a handshake presenting cert at TLS version, then one
// read, and returns the first error: in TLS 1.3 the client's handshake ends
// before the server judges its chain, so the alert comes with the read.
func handshakeWith(t *testing.T, ts *testServer, pki *certstest.PKI, cert tls.Certificate, version uint16) error {
	t.Helper()
	clientCfg := pki.WithCertificate(cert)
	clientCfg.MaxVersion = version
	raw, err := net.DialTimeout("tcp", ts.Addr().String(), safety)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	_ = raw.SetDeadline(time.Now().Add(safety))
	tc := tls.Client(raw, clientCfg)
	err = tc.Handshake()
	if err == nil {
		_, err = tc.Read(make([]byte, 1))
	}
	return err
}

func chainBytes(c tls.Certificate) int {
	n := 0
	for _, der := range c.Certificate {
		n += len(der)
	}
	return n
}

// Over real sockets: a TLS 1.3 handshake in which the server asks for a
// second ClientHello (its groups do not include the client's key share)
// gets the second hello's bound, not the last flight's, and its lock.
func TestTLSHelloRetryRequest(t *testing.T) {
	pki := certstest.NewPKI(t, t.TempDir())
	cfg, err := certs.Load(certs.Files{Cert: pki.Server.Cert, Key: pki.Server.Key, ClientCA: pki.CA})
	if err != nil {
		t.Fatal(err)
	}
	cfg.CurvePreferences = []tls.CurveID{tls.CurveP256} // Go's client sends an X25519 key share first
	ts := startServerConfig(t, eventloop.Config{ListenAddress: "127.0.0.1:0", Logger: zerolog.Nop(), TLS: cfg, Identity: certs.Identity})
	raw, err := net.DialTimeout("tcp", ts.Addr().String(), safety)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = raw.Close() })
	_ = raw.SetDeadline(time.Now().Add(safety))
	first := &firstRecord{Conn: raw}
	clientCfg := pki.ClientTLS(certstest.ClientURI)
	clientCfg.MinVersion = tls.VersionTLS13
	tc := tls.Client(first, clientCfg)
	if err := tc.Handshake(); err != nil {
		t.Fatalf("handshake through a HelloRetryRequest: %v", err)
	}
	if !eventloop.IsHelloRetryRequest(first.record) {
		t.Fatalf("the server's first record %x is no HelloRetryRequest: the test tests nothing", first.record)
	}
	c := wire.New(tc, "TLS client")
	c.Safety = safety
	c.Send(protocol.AppendAcquire(nil, longLease, "after-a-retry"))
	c.Expect(protocol.TypeAcquired)
}

// firstRecord keeps the first bytes the server sends.
type firstRecord struct {
	net.Conn
	record []byte
}

func (c *firstRecord) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if len(c.record) < 64 {
		c.record = append(c.record, p[:min(n, 64-len(c.record))]...)
	}
	return n, err
}
