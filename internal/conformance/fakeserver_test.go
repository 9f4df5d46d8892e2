package conformance

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/monolock/monolock/protocol"
)

// TestWireInvariants: the fake server's reader flags a second request sent
// while one is unanswered, a HEARTBEAT or RELEASE first, a second ACQUIRE,
// a byte after RELEASE and a byte that is no client frame, and accepts a
// well-behaved exchange.
func TestWireInvariants(t *testing.T) {
	acq := protocol.AppendAcquire(nil, 2000, "x")
	cases := []struct {
		name  string
		sends [][]byte // written in turn; the server answers each request when answer is set
		reply bool
		want  string // "" for no violation
	}{
		{"well-behaved", [][]byte{acq, {0x02}, {0x02}}, true, ""},
		{"two in flight", [][]byte{acq, {0x02}}, false, "rule 3"},
		{"heartbeat first", [][]byte{{0x02}}, true, "first frame must be ACQUIRE"},
		{"second acquire", [][]byte{acq, acq}, true, "second ACQUIRE"},
		{"garbage", [][]byte{acq, {0x7f}}, true, "none of ACQUIRE (0x01), HEARTBEAT (0x02), RELEASE (0x03)"},
		{"released", [][]byte{acq, {0x02}, {0x03}}, true, ""},
		{"release first", [][]byte{{0x03}}, true, "the client sent RELEASE first"},
		{"a heartbeat after release", [][]byte{acq, {0x03, 0x02}}, true, "1 byte(s) after RELEASE"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Listen(nil)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			nc, err := net.Dial("tcp", f.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			c, err := f.Next(safety)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range tc.sends {
				if _, err := nc.Write(b); err != nil {
					t.Fatal(err)
				}
				if b[0] == 0x7f || b[0] == byte(protocol.TypeRelease) {
					break // no request: nothing to answer
				}
				if _, err := c.NextReq(safety); err != nil {
					t.Fatal(err)
				}
				if tc.reply {
					if err := c.Reply(acquired(1)); err != nil {
						t.Fatal(err)
					}
					buf := make([]byte, 9)
					_ = nc.SetReadDeadline(time.Now().Add(safety))
					if _, err := nc.Read(buf); err != nil {
						t.Fatal(err)
					}
				}
			}
			_ = nc.Close()
			if _, _, err := c.WaitEnd(safety); err != nil {
				t.Fatal(err)
			}
			got := strings.Join(c.Violations(), "; ")
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("violations %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseDriver(t *testing.T) {
	d, err := ParseDriver("python=python3 clients/python/conformance_driver.py --aio")
	if err != nil || d.Name != "python" || len(d.Argv) != 3 {
		t.Errorf("got %+v, %v", d, err)
	}
	for _, bad := range []string{"", "python", "=x", "go="} {
		if _, err := ParseDriver(bad); err == nil || !strings.Contains(err.Error(), "NAME=COMMAND") {
			t.Errorf("ParseDriver(%q) = %v, want an error naming NAME=COMMAND", bad, err)
		}
	}
}
