package tlsconn

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// clientHello returns the first flight of a crypto/tls client: one record
// holding its ClientHello.
func clientHello(t *testing.T) []byte {
	t.Helper()
	client, server := net.Pipe()
	defer server.Close()
	go func() {
		_ = tls.Client(client, &tls.Config{ServerName: "monolock.test", InsecureSkipVerify: true}).Handshake()
		client.Close()
	}()
	hdr := make([]byte, RecordHeaderLen)
	if _, err := io.ReadFull(server, hdr); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, binary.BigEndian.Uint16(hdr[3:]))
	if _, err := io.ReadFull(server, body); err != nil {
		t.Fatal(err)
	}
	return append(hdr, body...)
}

// reframe cuts a record's handshake bytes into records of at most size bytes.
func reframe(rec []byte, size int) []byte {
	var out []byte
	for body := rec[RecordHeaderLen:]; len(body) > 0; {
		n := min(size, len(body))
		out = append(out, rec[0], rec[1], rec[2], byte(n>>8), byte(n))
		out = append(out, body[:n]...)
		body = body[n:]
	}
	return out
}

func TestHelloArrived(t *testing.T) {
	hello := clientHello(t)
	for _, flight := range [][]byte{hello, reframe(hello, 1), reframe(hello, 3), reframe(hello, 100)} {
		for n := range len(flight) {
			if ok, err := HelloArrived(flight[:n]); ok || err != nil {
				t.Fatalf("%d of %d bytes: arrived %v, %v; want not yet", n, len(flight), ok, err)
			}
		}
		if ok, err := HelloArrived(flight); !ok || err != nil {
			t.Fatalf("whole flight of %d bytes: arrived %v, %v", len(flight), ok, err)
		}
		// What follows the hello (a client's early records) changes nothing.
		if ok, err := HelloArrived(append(bytes.Clone(flight), 23, 3, 3, 0)); !ok || err != nil {
			t.Fatalf("hello and more: arrived %v, %v", ok, err)
		}
	}
	// Not a TLS handshake: handed to crypto/tls at once, which refuses it.
	for _, notTLS := range []string{"GET / HTTP/1.1\r\n", "\x17\x03\x03\x00\x10", "\x16\x03\x01\x00\x00", "\x16\x03\x01\x00\x04\x02\x00\x00\x00"} {
		if ok, err := HelloArrived([]byte(notTLS)); !ok || err != nil {
			t.Errorf("%q: arrived %v, %v; want true so that crypto/tls answers it", notTLS, ok, err)
		}
	}
	// A ClientHello declaring more than the bound is refused from its header.
	big := []byte{22, 3, 1, 0, 4, typeClientHello, 0, byte((MaxHelloMessage + 1) >> 8), byte((MaxHelloMessage + 1) & 0xff)}
	if _, err := HelloArrived(big); !errors.Is(err, ErrHelloTooLarge) {
		t.Errorf("a ClientHello of %d bytes: %v; want ErrHelloTooLarge", MaxHelloMessage+1, err)
	}
	limit := []byte{22, 3, 1, 0, 4, typeClientHello, 0, byte(MaxHelloMessage >> 8), byte(MaxHelloMessage & 0xff)}
	if ok, err := HelloArrived(limit); ok || err != nil {
		t.Errorf("a ClientHello of %d bytes, its header sent: %v, %v; want not yet", MaxHelloMessage, ok, err)
	}
}

// serverRecord is a handshake record of the server's beginning with a
// message of type typ whose body starts with a legacy version and random.
func serverRecord(typ byte, random []byte) []byte {
	body := append([]byte{3, 3}, random...)
	msg := append([]byte{typ, 0, byte(len(body) >> 8), byte(len(body))}, body...)
	return append([]byte{recordTypeHandshake, 3, 3, byte(len(msg) >> 8), byte(len(msg))}, msg...)
}

// changeCipherSpec is the record a TLS 1.3 server sends after a
// HelloRetryRequest or its ServerHello, for middleboxes.
var changeCipherSpec = []byte{20, 3, 3, 0, 1, 1}

// The HelloRetryRequest's random is SHA-256("HelloRetryRequest").
func TestHelloRetryRandom(t *testing.T) {
	if sum := sha256.Sum256([]byte("HelloRetryRequest")); sum != helloRetryRandom {
		t.Fatalf("helloRetryRandom is %x, want %x", helloRetryRandom, sum)
	}
	if !IsHelloRetryRequest(serverRecord(typeServerHello, helloRetryRandom[:])) {
		t.Fatal("a HelloRetryRequest not recognised")
	}
	if IsHelloRetryRequest(serverRecord(typeServerHello, make([]byte, 32))) {
		t.Fatal("a ServerHello with another random taken for a HelloRetryRequest")
	}
	if IsHelloRetryRequest(serverRecord(typeServerHello, helloRetryRandom[:16])) {
		t.Fatal("a record cut short taken for a HelloRetryRequest")
	}
}

// writeIn hands stream to m in pieces of size bytes and returns the last
// answer it read.
func writeIn(m *ServerMessages, stream []byte, size int) (answered, retry bool) {
	for len(stream) > 0 {
		n := min(size, len(stream))
		if a, r := m.Write(stream[:n]); a {
			answered, retry = true, r
		}
		stream = stream[n:]
	}
	return answered, retry
}

// What the server sends is read as records and messages, not as writes: a
// HelloRetryRequest is recognised however its bytes are cut into writes
// and records, and what follows it decides nothing until the next answer.
func TestServerMessagesAnyCut(t *testing.T) {
	hrr := serverRecord(typeServerHello, helloRetryRandom[:])
	hello := serverRecord(typeServerHello, make([]byte, 32))
	encrypted := []byte{23, 3, 3, 0, 3, 0xde, 0xad, 0xbe}
	for _, c := range []struct {
		name          string
		stream        []byte
		answered, hrr bool
	}{
		{"HelloRetryRequest", hrr, true, true},
		{"HelloRetryRequest and change_cipher_spec", append(bytes.Clone(hrr), changeCipherSpec...), true, true},
		{"HelloRetryRequest cut into records of 3", reframe(hrr, 3), true, true},
		{"ServerHello", hello, true, false},
		{"ServerHello, change_cipher_spec, encrypted", append(append(bytes.Clone(hello), changeCipherSpec...), encrypted...), true, false},
		{"HelloRetryRequest, then the ServerHello", append(append(bytes.Clone(hrr), changeCipherSpec...), hello...), true, false},
		{"change_cipher_spec alone", changeCipherSpec, false, false},
		{"half a HelloRetryRequest", hrr[:20], false, false},
	} {
		for _, size := range []int{1, 2, 7, 40, len(c.stream)} {
			var m ServerMessages
			answered, retry := writeIn(&m, c.stream, size)
			if answered != c.answered || retry != c.hrr {
				t.Errorf("%s in writes of %d: answered %v, HelloRetryRequest %v; want %v, %v", c.name, size, answered, retry, c.answered, c.hrr)
			}
		}
	}
}

// recordingConn is the server's end of a pipe that keeps what the server
// writes.
type recordingConn struct {
	net.Conn
	wrote []byte
}

func (c *recordingConn) Write(p []byte) (int, error) {
	c.wrote = append(c.wrote, p...)
	return c.Conn.Write(p)
}

// A real crypto/tls server that asks for another key share sends a
// HelloRetryRequest (then fails, having no certificate): its output, cut
// anywhere, reads as one, and nothing after it reads as an answer. The two
// talk over loopback TCP, whose buffers let both write at once.
func TestServerMessagesOfCryptoTLS(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	wrote := make(chan []byte, 1)
	go func() {
		server, err := ln.Accept()
		if err != nil {
			wrote <- nil
			return
		}
		defer server.Close()
		rec := &recordingConn{Conn: server}
		_ = tls.Server(rec, &tls.Config{
			MinVersion:       tls.VersionTLS13,
			CurvePreferences: []tls.CurveID{tls.CurveP384}, // not among the client's first key shares
		}).Handshake() // fails without a certificate, after the HelloRetryRequest
		wrote <- rec.wrote
	}()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	_ = client.SetDeadline(time.Now().Add(time.Minute)) // a safety net, never reached when all goes well
	_ = tls.Client(client, &tls.Config{
		ServerName: "monolock.test", InsecureSkipVerify: true, MinVersion: tls.VersionTLS13,
		CurvePreferences: []tls.CurveID{tls.X25519, tls.CurveP384},
	}).Handshake()
	client.Close()
	out := <-wrote
	if len(out) == 0 {
		t.Fatal("the server wrote nothing")
	}
	for _, size := range []int{1, 5, 6, 64, len(out)} {
		var m ServerMessages
		if answered, retry := writeIn(&m, out, size); !answered || !retry {
			t.Fatalf("crypto/tls's HelloRetryRequest in writes of %d: answered %v, retry %v", size, answered, retry)
		}
	}
}
