package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/monolock/monolock/internal/certs/certstest"
)

// The certificates themselves come from certstest, which the server's
// end-to-end tests share; this file has the handshake plumbing.

const testTimeout = 5 * time.Second

func newPKI(t *testing.T) *certstest.PKI {
	t.Helper()
	return certstest.NewPKI(t, t.TempDir())
}

func mtlsFiles(p *certstest.PKI) Files {
	return Files{Cert: p.Server.Cert, Key: p.Server.Key, ClientCA: p.CA}
}

func plainFiles(p *certstest.PKI) Files {
	return Files{Cert: p.Server.Cert, Key: p.Server.Key}
}

// accepted is the server's side of one handshake.
type accepted struct {
	err   error
	state tls.ConnectionState
}

// testServer accepts TLS connections on loopback with one configuration,
// reports each handshake, and echoes what a client sends on success.
type testServer struct {
	t        *testing.T
	ln       net.Listener
	accepted chan accepted
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn
}

func startServer(t *testing.T, cfg *tls.Config) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &testServer{t: t, ln: ln, accepted: make(chan accepted, 64)}
	s.wg.Add(1)
	go s.acceptLoop(cfg)
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *testServer) acceptLoop(cfg *tls.Config) {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns = append(s.conns, c)
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer c.Close()
			tc := tls.Server(c, cfg)
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			err := tc.HandshakeContext(ctx)
			cancel()
			s.accepted <- accepted{err: err, state: tc.ConnectionState()}
			if err != nil {
				return
			}
			_, _ = io.Copy(tc, tc)
		}()
	}
}

// next is the server's side of the next handshake.
func (s *testServer) next() accepted {
	s.t.Helper()
	select {
	case a := <-s.accepted:
		return a
	case <-time.After(testTimeout):
		s.t.Fatal("the server saw no handshake")
		return accepted{}
	}
}

// dial connects with cfg and checks the connection with one echoed byte, so
// that a client certificate the server rejects fails here in TLS 1.3 too
// (where the client's handshake completes before the server has checked it).
// The connection is closed at the end of the test.
func (s *testServer) dial(cfg *tls.Config) (*tls.Conn, error) {
	s.t.Helper()
	c, err := net.DialTimeout("tcp", s.ln.Addr().String(), testTimeout)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { c.Close() })
	tc := tls.Client(c, cfg)
	if err := ping(tc); err != nil {
		return nil, err
	}
	return tc, nil
}

// ping sends one byte and waits for its echo.
func ping(tc *tls.Conn) error {
	if err := tc.SetDeadline(time.Now().Add(testTimeout)); err != nil {
		return err
	}
	if err := tc.Handshake(); err != nil {
		return err
	}
	if _, err := tc.Write([]byte{'p'}); err != nil {
		return err
	}
	var b [1]byte
	if _, err := io.ReadFull(tc, b[:]); err != nil {
		return err
	}
	if b[0] != 'p' {
		return errors.New("echo mismatch")
	}
	return tc.SetDeadline(time.Time{})
}

// handshake runs one connection with the client config cfg against s and
// returns the server's side and the client's error.
func (s *testServer) handshake(cfg *tls.Config) (accepted, *tls.Conn, error) {
	s.t.Helper()
	tc, err := s.dial(cfg)
	return s.next(), tc, err
}

// presented is the server certificate a client saw.
func presented(t *testing.T, tc *tls.Conn) *x509.Certificate {
	t.Helper()
	cs := tc.ConnectionState()
	if len(cs.PeerCertificates) == 0 {
		t.Fatal("the server presented no certificate")
	}
	return cs.PeerCertificates[0]
}
