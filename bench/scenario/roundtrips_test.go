package scenario

import (
	"context"
	"net"
	"testing"
)

// TestRoundTripsCountTurns: writes in a row are one round trip; a read
// between them starts the next.
func TestRoundTripsCountTurns(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 2)
		for {
			if _, err := c.Read(buf[:2]); err != nil { // one request: two bytes
				return
			}
			if _, err := c.Write([]byte{'!'}); err != nil {
				return
			}
		}
	}()
	var rt roundTrips
	c, err := rt.dial(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	one := make([]byte, 1)
	for range 3 {
		// a request in two pieces, then its answer
		for _, b := range []byte("ab") {
			if _, err := c.Write([]byte{b}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.Read(one); err != nil {
			t.Fatal(err)
		}
	}
	if n := rt.count(); n != 3 {
		t.Fatalf("%d round trips; want 3", n)
	}
}
