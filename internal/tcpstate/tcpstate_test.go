package tcpstate_test

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/monolock/monolock/internal/tcpstate"
)

// A table as Linux prints it: a listener, an established pair, and a
// TIME_WAIT entry on local port 0xa2f4.
const table = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 12345 1 0000000000000000 100 0 0 10 0
   1: 0100007F:A2F4 0100007F:1F90 06 00000000:00000000 03:00001770 00000000     0        0 0 3 0000000000000000
   2: 0100007F:1F90 0100007F:A2F5 01 00000000:00000000 00:00000000 00000000  1000        0 12346 1 0000000000000000 20 4 30 10 -1
`

func TestParse(t *testing.T) {
	socks, err := tcpstate.Parse(strings.NewReader(table))
	if err != nil {
		t.Fatal(err)
	}
	want := []tcpstate.Socket{
		{LocalPort: 0x1f90, RemotePort: 0, State: tcpstate.Listen},
		{LocalPort: 0xa2f4, RemotePort: 0x1f90, State: tcpstate.TimeWait},
		{LocalPort: 0x1f90, RemotePort: 0xa2f5, State: tcpstate.Established},
	}
	if len(socks) != len(want) {
		t.Fatalf("got %d sockets %v, want %v", len(socks), socks, want)
	}
	for i := range want {
		if socks[i] != want[i] {
			t.Errorf("socket %d = %+v, want %+v", i, socks[i], want[i])
		}
	}
	if n := tcpstate.Count(socks, tcpstate.TimeWait); n != 1 {
		t.Errorf("Count(TimeWait) = %d, want 1", n)
	}
}

func TestParseRefusesGarbage(t *testing.T) {
	for _, bad := range []string{
		"header\n 0: 0100007F 00000000:0000 0A\n",
		"header\n 0: 0100007F:1F90 00000000:0000 ZZ\n",
		"header\n 0: 0100007F:1F90\n",
	} {
		if _, err := tcpstate.Parse(strings.NewReader(bad)); err == nil {
			t.Errorf("Parse(%q) = nil error", bad)
		}
	}
}

// Over real sockets: the side that closes first keeps the TIME_WAIT entry
// on its local port; the side that closes second keeps none.
func TestTimeWaitFollowsTheFirstClose(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, clientFirst := range []bool{true, false} {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		first, second := net.Conn(c), s
		if !clientFirst {
			first, second = s, c
		}
		_ = first.Close()
		if _, err := second.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("read after the peer's close = %v, want EOF", err)
		}
		_ = second.Close()
		if _, err := first.Read(make([]byte, 1)); err == nil {
			t.Fatal("read on a closed conn succeeded")
		}
		port := c.LocalAddr().(*net.TCPAddr).Port
		n, err := tcpstate.ConnTimeWait(c, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if clientFirst && n == 0 {
			t.Errorf("client closed first: no TIME_WAIT entry on its port %d", port)
		}
		if !clientFirst && n != 0 {
			t.Errorf("server closed first: %d TIME_WAIT entries on the client's port %d, want 0", n, port)
		}
	}
}
