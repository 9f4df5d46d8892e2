package main

import (
	"bytes"
	"crypto/tls"
	"io"
	"testing"
	"time"

	"github.com/monolock/monolock/internal/certs/certstest"
)

// The record writer's records are what crypto/tls expects of a TLS 1.3
// client: application data before and after a run of KeyUpdates arrives
// whole, which it could not if a key were wrong.
func TestRecordWriterSendsKeyUpdates(t *testing.T) {
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
	w, err := dialRecords(ln.Addr().String(), pki.ClientTLS(""), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer w.raw.Close()
	out := w.appendRecord(nil, contentApplication, []byte("hello"))
	for range 10 { // fewer than crypto/tls's 16 records without application data
		if out, err = w.appendKeyUpdate(out); err != nil {
			t.Fatal(err)
		}
	}
	out = w.appendRecord(out, contentApplication, []byte("world"))
	if _, err := w.raw.Write(out); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, []byte("helloworld")) {
		t.Fatalf("the server read %q, want helloworld", b)
	}
}
