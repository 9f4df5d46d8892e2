package eventloop_test

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"net"
	"strings"
	"testing"

	"github.com/monolock/monolock/internal/certs/certstest"
)

// rawTLS is a TLS 1.3 client session whose records the test writes itself,
// from the client's traffic secret: post-handshake messages that crypto/tls
// never sends (a stream of KeyUpdates, a handshake message left half-sent).
type rawTLS struct {
	net.Conn
	newHash func() hash.Hash
	keyLen  int
	secret  []byte
	aead    cipher.AEAD
	iv      []byte
	seq     uint64
}

// dialRaw completes a mutual-TLS 1.3 handshake with ts and hands the
// session's writing side to the test.
func dialRaw(t *testing.T, ts *testServer, pki *certstest.PKI) *rawTLS {
	t.Helper()
	tc, held := dialHeldAsLogged(t, ts, pki)
	r := &rawTLS{Conn: held.Conn}
	t.Cleanup(func() { _ = r.Close() })
	switch suite := tc.ConnectionState().CipherSuite; suite {
	case tls.TLS_AES_128_GCM_SHA256:
		r.newHash, r.keyLen = sha256.New, 16
	case tls.TLS_AES_256_GCM_SHA384:
		r.newHash, r.keyLen = sha512.New384, 32
	default:
		t.Skipf("cipher suite %s: the test writes AES-GCM records only", tls.CipherSuiteName(suite))
	}
	r.secret = held.secret
	r.rekey(t)
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
	var keyLog bytes.Buffer
	cfg := pki.ClientTLS(certstest.ClientURI)
	cfg.MinVersion = tls.VersionTLS13
	cfg.KeyLogWriter = &keyLog
	tc := tls.Client(held, cfg)
	if err := tc.Handshake(); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	for line := range strings.Lines(keyLog.String()) {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "CLIENT_TRAFFIC_SECRET_0" {
			held.secret, _ = hex.DecodeString(f[2])
		}
	}
	if held.secret == nil {
		t.Fatal("the client logged no traffic secret")
	}
	return tc, held
}

// expandLabel is TLS 1.3's HKDF-Expand-Label with an empty context.
func (r *rawTLS) expandLabel(t *testing.T, label string, n int) []byte {
	t.Helper()
	full := "tls13 " + label
	info := []byte{byte(n >> 8), byte(n), byte(len(full))}
	info = append(append(info, full...), 0)
	out, err := hkdf.Expand(r.newHash, r.secret, string(info), n)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (r *rawTLS) rekey(t *testing.T) {
	t.Helper()
	block, err := aes.NewCipher(r.expandLabel(t, "key", r.keyLen))
	if err != nil {
		t.Fatal(err)
	}
	if r.aead, err = cipher.NewGCM(block); err != nil {
		t.Fatal(err)
	}
	r.iv, r.seq = r.expandLabel(t, "iv", 12), 0
}

// record encrypts content of the inner type into one record.
func (r *rawTLS) record(inner byte, content []byte) []byte {
	plain := append(bytes.Clone(content), inner)
	nonce := bytes.Clone(r.iv)
	var seq [8]byte
	binary.BigEndian.PutUint64(seq[:], r.seq)
	for i := range seq {
		nonce[4+i] ^= seq[i]
	}
	r.seq++
	n := len(plain) + r.aead.Overhead()
	header := []byte{23, 3, 3, byte(n >> 8), byte(n)}
	return r.aead.Seal(header, nonce, plain, header)
}

// appData is one record of application data.
func (r *rawTLS) appData(p []byte) []byte { return r.record(23, p) }

// handshake is one record carrying handshake bytes.
func (r *rawTLS) handshake(p []byte) []byte { return r.record(22, p) }

// keyUpdate is one KeyUpdate record (update_not_requested); the client's
// keys move on after it.
func (r *rawTLS) keyUpdate(t *testing.T) []byte {
	t.Helper()
	rec := r.handshake([]byte{24, 0, 0, 1, 0})
	r.secret = r.expandLabel(t, "traffic upd", r.newHash().Size())
	r.rekey(t)
	return rec
}

func (r *rawTLS) send(t *testing.T, records ...[]byte) {
	t.Helper()
	if _, err := r.Write(bytes.Join(records, nil)); err != nil {
		t.Fatal(err)
	}
}
