package wire

import (
	"net"
	"testing"
)

// ClosedAddr returns a loopback address nothing listens on: a port the
// system handed out and that was closed again, so a connect there is
// refused.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}
