package client

import (
	"net"
	"syscall"
	"testing"
)

// TestDefaultDialerLeavesKeepAliveOff: the heartbeats are the session's
// failure detector, so the Client's own dialer turns TCP keep-alive off
// (four setsockopt calls fewer per connect); a Dialer given in Config keeps
// its own setting.
func TestDefaultDialerLeavesKeepAliveOff(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	for _, tc := range []struct {
		name   string
		dialer Dialer
		want   int
	}{
		{"default", nil, 0},
		{"a Dialer of the caller's", &net.Dialer{}, 1},
	} {
		c := New(Config{Address: ln.Addr().String(), Dialer: tc.dialer})
		conn, err := c.dial(testContext(t))
		if err != nil {
			t.Fatal(err)
		}
		raw, err := conn.(*net.TCPConn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var on int
		var serr error
		if err := raw.Control(func(fd uintptr) { on, serr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_KEEPALIVE) }); err != nil || serr != nil {
			t.Fatal(err, serr)
		}
		_ = conn.Close()
		if on != tc.want {
			t.Errorf("%s: SO_KEEPALIVE = %d, want %d", tc.name, on, tc.want)
		}
	}
}
