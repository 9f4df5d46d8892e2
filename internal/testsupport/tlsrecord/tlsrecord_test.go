package tlsrecord_test

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/monolock/monolock/internal/certs/certstest"
	"github.com/monolock/monolock/internal/testsupport/tlsrecord"
)

// The record writer's records are what crypto/tls expects of a TLS 1.3
// client: application data before and after a run of KeyUpdates arrives
// whole, which it could not if a key were wrong.
func TestWriterSendsKeyUpdates(t *testing.T) {
	dir := t.TempDir()
	pki := certstest.NewPKI(t, dir)
	cert, err := tls.LoadX509KeyPair(pki.Server.Cert, pki.Server.Key)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		b := make([]byte, 10)
		_, err = io.ReadFull(c, b)
		if err != nil {
			b = []byte(err.Error())
		}
		got <- b
	}()
	raw, w, err := tlsrecord.Dial(ln.Addr().String(), pki.ClientTLS(""), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	out := w.AppendRecord(nil, tlsrecord.ContentApplication, []byte("hello"))
	for range 10 { // fewer than crypto/tls's 16 records without application data
		if out, err = w.AppendKeyUpdate(out); err != nil {
			t.Fatal(err)
		}
	}
	out = w.AppendRecord(out, tlsrecord.ContentApplication, []byte("world"))
	if _, err := raw.Write(out); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, []byte("helloworld")) {
		t.Fatalf("the server read %q, want helloworld", b)
	}
}

func TestOnlyAESGCMSuitesAreWritten(t *testing.T) {
	_, err := tlsrecord.NewWriter(tls.TLS_CHACHA20_POLY1305_SHA256, make([]byte, 32))
	if !errors.Is(err, tlsrecord.ErrUnsupportedSuite) {
		t.Fatalf("err = %v, want ErrUnsupportedSuite", err)
	}
}
