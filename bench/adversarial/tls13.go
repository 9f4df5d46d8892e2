package main

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

// crypto/tls has no way to send a KeyUpdate or a post-handshake handshake
// message of the sender's choosing. recordWriter does it: after a TLS 1.3
// handshake made by crypto/tls, it takes the client's application traffic
// secret from the key log and writes records itself on the raw socket,
// encrypted as RFC 8446 §5.2 says, moving to the next secret after each
// KeyUpdate it sends (§7.2). It writes nothing through the tls.Conn, so its
// first record is the client's first application record (sequence 0).
type recordWriter struct {
	raw    net.Conn
	suite  uint16
	secret []byte
	aead   cipher.AEAD
	iv     []byte
	seq    uint64
	buf    []byte
}

// keyLog keeps the client traffic secret of one handshake.
type keyLog struct {
	mu     sync.Mutex
	secret []byte
}

func (k *keyLog) Write(p []byte) (int, error) {
	sc := bufio.NewScanner(bytes.NewReader(p))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 3 && f[0] == "CLIENT_TRAFFIC_SECRET_0" {
			s, err := hex.DecodeString(f[2])
			if err != nil {
				return 0, err
			}
			k.mu.Lock()
			k.secret = s
			k.mu.Unlock()
		}
	}
	return len(p), nil
}

// dialRecords makes a TLS 1.3 handshake with cfg and returns a writer of
// raw records on the connection.
func dialRecords(addr string, cfg *tls.Config, timeout time.Duration) (*recordWriter, error) {
	raw, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	kl := &keyLog{}
	cfg = cfg.Clone()
	cfg.MinVersion = tls.VersionTLS13
	cfg.KeyLogWriter = kl
	tc := tls.Client(raw, cfg)
	_ = raw.SetDeadline(time.Now().Add(timeout))
	if err := tc.Handshake(); err != nil {
		_ = raw.Close()
		return nil, err
	}
	_ = raw.SetDeadline(time.Time{})
	kl.mu.Lock()
	secret := kl.secret
	kl.mu.Unlock()
	if secret == nil {
		_ = raw.Close()
		return nil, errors.New("the key log has no client traffic secret")
	}
	w := &recordWriter{raw: raw, suite: tc.ConnectionState().CipherSuite}
	if err := w.setSecret(secret); err != nil {
		_ = raw.Close()
		return nil, err
	}
	return w, nil
}

func (w *recordWriter) hash() (func() hash.Hash, int, error) {
	switch w.suite {
	case tls.TLS_AES_128_GCM_SHA256:
		return sha256.New, 16, nil
	case tls.TLS_AES_256_GCM_SHA384:
		return sha512.New384, 32, nil
	}
	return nil, 0, fmt.Errorf("cipher suite %s not supported by the record writer", tls.CipherSuiteName(w.suite))
}

// expandLabel is HKDF-Expand-Label (RFC 8446 §7.1) with an empty context.
func expandLabel(h func() hash.Hash, secret []byte, label string, n int) ([]byte, error) {
	full := "tls13 " + label
	info := make([]byte, 0, 4+len(full))
	info = binary.BigEndian.AppendUint16(info, uint16(n))
	info = append(info, byte(len(full)))
	info = append(info, full...)
	info = append(info, 0)
	return hkdf.Expand(h, secret, string(info), n)
}

func (w *recordWriter) setSecret(secret []byte) error {
	h, keyLen, err := w.hash()
	if err != nil {
		return err
	}
	key, err := expandLabel(h, secret, "key", keyLen)
	if err != nil {
		return err
	}
	iv, err := expandLabel(h, secret, "iv", 12)
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

// appendRecord encrypts one record of content type typ.
func (w *recordWriter) appendRecord(out []byte, typ byte, content []byte) []byte {
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

const (
	contentHandshake   = 22
	contentApplication = 23
)

// keyUpdate is a KeyUpdate message that requests no update in return.
var keyUpdate = []byte{24, 0, 0, 1, 0}

// appendKeyUpdate encrypts a KeyUpdate and moves to the next secret.
func (w *recordWriter) appendKeyUpdate(out []byte) ([]byte, error) {
	out = w.appendRecord(out, contentHandshake, keyUpdate)
	h, _, err := w.hash()
	if err != nil {
		return out, err
	}
	next, err := expandLabel(h, w.secret, "traffic upd", h().Size())
	if err != nil {
		return out, err
	}
	return out, w.setSecret(next)
}
