// Package keepalive is the tests' raw HTTP/1.1 client: one connection that
// stays open between requests and whose idleness the test controls, which
// net/http's client hides.
package keepalive

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// Safety bounds every read and write of a Conn. It is a net against a hung
// test, never a timing assertion.
const Safety = 10 * time.Second

// Conn is one keep-alive connection; R reads what the server sends.
type Conn struct {
	net.Conn
	R *bufio.Reader
}

// Dial connects to addr and closes the connection when the test ends.
func Dial(t testing.TB, addr string) *Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(Safety))
	return &Conn{Conn: c, R: bufio.NewReader(c)}
}

// Send writes a GET request for path without reading the answer. Its Host
// is the address dialed, as curl sends it: the HTTP ports answer no other
// name unless it is listed (-http-allowed-hosts).
func (c *Conn) Send(t testing.TB, path string) {
	t.Helper()
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, c.RemoteAddr()); err != nil {
		t.Fatal(err)
	}
}

// Get requests path and reads the whole answer; the connection stays open.
func (c *Conn) Get(t testing.TB, path string) int {
	t.Helper()
	c.Send(t, path)
	resp, err := http.ReadResponse(c.R, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}
