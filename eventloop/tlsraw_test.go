package eventloop_test

import (
	"bytes"
	"crypto/tls"
	"errors"
	"net"
	"testing"

	"github.com/monolock/monolock/internal/certs/certstest"
	"github.com/monolock/monolock/internal/testsupport/tlsrecord"
)

// rawTLS is a TLS 1.3 client session whose records the test writes itself
// (internal/testsupport/tlsrecord), from the client's traffic secret:
// post-handshake messages that crypto/tls never sends (a stream of
// KeyUpdates, a handshake message left half-sent).
type rawTLS struct {
	net.Conn
	w *tlsrecord.Writer
}

// dialRaw completes a mutual-TLS 1.3 handshake with ts and hands the
// session's writing side to the test.
func dialRaw(t *testing.T, ts *testServer, pki *certstest.PKI) *rawTLS {
	t.Helper()
	tc, held := dialHeldAsLogged(t, ts, pki)
	r := &rawTLS{Conn: held.Conn}
	t.Cleanup(func() { _ = r.Close() })
	w, err := tlsrecord.NewWriter(tc.ConnectionState().CipherSuite, held.secret)
	if errors.Is(err, tlsrecord.ErrUnsupportedSuite) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	r.w = w
	if _, err := r.Write(held.take()); err != nil { // the client's Finished
		t.Fatal(err)
	}
	return r
}

// loggedHeld is a heldConn whose client logs its traffic secret.
type loggedHeld struct {
	*heldConn
	secret []byte
}

func dialHeldAsLogged(t *testing.T, ts *testServer, pki *certstest.PKI) (*tls.Conn, *loggedHeld) {
	t.Helper()
	raw, err := net.DialTimeout("tcp", ts.Addr().String(), safety)
	if err != nil {
		t.Fatal(err)
	}
	held := &loggedHeld{heldConn: &heldConn{Conn: raw}}
	keyLog := &tlsrecord.KeyLog{}
	cfg := pki.ClientTLS(certstest.ClientURI)
	cfg.MinVersion = tls.VersionTLS13
	cfg.KeyLogWriter = keyLog
	tc := tls.Client(held, cfg)
	if err := tc.Handshake(); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	if held.secret = keyLog.ClientSecret(); held.secret == nil {
		t.Fatal("the client logged no traffic secret")
	}
	return tc, held
}

// appData is one record of application data.
func (r *rawTLS) appData(p []byte) []byte {
	return r.w.AppendRecord(nil, tlsrecord.ContentApplication, p)
}

// handshake is one record carrying handshake bytes.
func (r *rawTLS) handshake(p []byte) []byte {
	return r.w.AppendRecord(nil, tlsrecord.ContentHandshake, p)
}

// keyUpdate is one KeyUpdate record (update_not_requested); the client's
// keys move on after it.
func (r *rawTLS) keyUpdate(t *testing.T) []byte {
	t.Helper()
	rec, err := r.w.AppendKeyUpdate(nil)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func (r *rawTLS) send(t *testing.T, records ...[]byte) {
	t.Helper()
	if _, err := r.Write(bytes.Join(records, nil)); err != nil {
		t.Fatal(err)
	}
}
