// Package tlsrecord writes TLS 1.3 records by hand, for the tests and the
// adversarial harness that send what crypto/tls never sends: a stream of
// KeyUpdates, a handshake message left half-sent, records of their choosing
// after a real handshake.
//
// After a handshake made by crypto/tls, a Writer takes the client's
// application traffic secret from the key log (KeyLog) and seals records as
// RFC 8446 §5.2 says, moving to the next secret after each KeyUpdate it
// writes (§7.2). Nothing may be written through the tls.Conn after the
// handshake: the Writer's first record is the client's first application
// record (sequence 0). AES-GCM suites only (ErrUnsupportedSuite otherwise).
package tlsrecord

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net"
	"strings"
	"sync"
	"time"
)

// Inner content types (RFC 8446 §5.1).
const (
	ContentHandshake   = 22
	ContentApplication = 23
)

// keyUpdate is a KeyUpdate message that requests no update in return.
var keyUpdate = []byte{24, 0, 0, 1, 0}

// ErrUnsupportedSuite is NewWriter's error for a suite other than
// TLS_AES_128_GCM_SHA256 and TLS_AES_256_GCM_SHA384.
var ErrUnsupportedSuite = errors.New("tlsrecord: only the AES-GCM suites are written")

// Writer seals the client's records of one TLS 1.3 session. It is not safe
// for concurrent use.
type Writer struct {
	newHash func() hash.Hash
	keyLen  int
	secret  []byte
	aead    cipher.AEAD
	iv      []byte
	seq     uint64
	buf     []byte
}

// NewWriter returns a writer for the session that negotiated suite, whose
// client application traffic secret is secret.
func NewWriter(suite uint16, secret []byte) (*Writer, error) {
	w := &Writer{}
	switch suite {
	case tls.TLS_AES_128_GCM_SHA256:
		w.newHash, w.keyLen = sha256.New, 16
	case tls.TLS_AES_256_GCM_SHA384:
		w.newHash, w.keyLen = sha512.New384, 32
	default:
		return nil, fmt.Errorf("%w: the session negotiated %s", ErrUnsupportedSuite, tls.CipherSuiteName(suite))
	}
	if err := w.setSecret(secret); err != nil {
		return nil, err
	}
	return w, nil
}

// expandLabel is HKDF-Expand-Label (RFC 8446 §7.1) with an empty context.
func (w *Writer) expandLabel(secret []byte, label string, n int) ([]byte, error) {
	full := "tls13 " + label
	info := make([]byte, 0, 4+len(full))
	info = binary.BigEndian.AppendUint16(info, uint16(n))
	info = append(info, byte(len(full)))
	info = append(info, full...)
	info = append(info, 0)
	return hkdf.Expand(w.newHash, secret, string(info), n)
}

func (w *Writer) setSecret(secret []byte) error {
	key, err := w.expandLabel(secret, "key", w.keyLen)
	if err != nil {
		return err
	}
	iv, err := w.expandLabel(secret, "iv", 12)
	if err != nil {
		return err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return err
	}
	if w.aead, err = cipher.NewGCM(block); err != nil {
		return err
	}
	w.secret, w.iv, w.seq = secret, iv, 0
	return nil
}

// AppendRecord appends one record that carries content of inner type typ.
func (w *Writer) AppendRecord(out []byte, typ byte, content []byte) []byte {
	inner := append(append(w.buf[:0], content...), typ)
	w.buf = inner
	hdr := []byte{23, 3, 3, 0, 0}
	binary.BigEndian.PutUint16(hdr[3:], uint16(len(inner)+w.aead.Overhead()))
	nonce := make([]byte, 12)
	copy(nonce, w.iv)
	for i := range 8 {
		nonce[4+i] ^= byte(w.seq >> (56 - 8*i))
	}
	w.seq++
	out = append(out, hdr...)
	return w.aead.Seal(out, nonce, inner, hdr)
}

// AppendKeyUpdate appends a KeyUpdate record (update_not_requested) and
// moves to the next traffic secret.
func (w *Writer) AppendKeyUpdate(out []byte) ([]byte, error) {
	out = w.AppendRecord(out, ContentHandshake, keyUpdate)
	next, err := w.expandLabel(w.secret, "traffic upd", w.newHash().Size())
	if err != nil {
		return out, err
	}
	return out, w.setSecret(next)
}

// KeyLog is a tls.Config.KeyLogWriter that keeps the client application
// traffic secret of one handshake.
type KeyLog struct {
	mu     sync.Mutex
	secret []byte
}

func (k *KeyLog) Write(p []byte) (int, error) {
	sc := bufio.NewScanner(bytes.NewReader(p))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 3 && f[0] == "CLIENT_TRAFFIC_SECRET_0" {
			s, err := hex.DecodeString(f[2])
			if err != nil {
				return 0, fmt.Errorf("tlsrecord: key log: %w", err)
			}
			k.mu.Lock()
			k.secret = s
			k.mu.Unlock()
		}
	}
	return len(p), nil
}

// ClientSecret is the secret logged, nil before the handshake logged it.
func (k *KeyLog) ClientSecret() []byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.secret
}

// Dial makes a TLS 1.3 handshake with cfg on a new connection to addr,
// within timeout, and returns the raw connection with a Writer for its
// records.
func Dial(addr string, cfg *tls.Config, timeout time.Duration) (net.Conn, *Writer, error) {
	raw, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, nil, err
	}
	kl := &KeyLog{}
	cfg = cfg.Clone()
	cfg.MinVersion = tls.VersionTLS13
	cfg.KeyLogWriter = kl
	tc := tls.Client(raw, cfg)
	_ = raw.SetDeadline(time.Now().Add(timeout))
	if err := tc.Handshake(); err != nil {
		_ = raw.Close()
		return nil, nil, err
	}
	_ = raw.SetDeadline(time.Time{})
	secret := kl.ClientSecret()
	if secret == nil {
		_ = raw.Close()
		return nil, nil, errors.New("tlsrecord: the key log has no client traffic secret")
	}
	w, err := NewWriter(tc.ConnectionState().CipherSuite, secret)
	if err != nil {
		_ = raw.Close()
		return nil, nil, err
	}
	return raw, w, nil
}
