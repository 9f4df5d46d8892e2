package auditcheck

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/monolock/monolock/internal/audit"
)

func TestReadDecodesEveryEvent(t *testing.T) {
	in := `{"time":"2026-11-30T07:21:13.797454167Z","event":"granted","lock":"chaos-3","identity":"","remote_addr":"127.0.0.1:55772","token":13835058055282163712,"wait_ms":0}

{"time":"2026-11-30T07:21:23.810808771Z","event":"released","lock":"chaos-3","identity":"","remote_addr":"127.0.0.1:55772","token":13835058055282163712,"held_ms":122,"reason":"shutdown"}
not json
{"time":"yesterday","event":"granted","lock":"x","token":1}
{"time":"2026-11-30T07:21:24Z","event":"granted","lock":"x"}
{"time":"2026-11-30T07:21:25Z","event":"denied","lock":"y","remote_addr":"[::1]:1"}
{"time":"2026-11-30T07:21:26Z","event":"granted","lock":"z","token":9}`
	events, bad, err := Read(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{
		{Line: 1, Time: time.Date(2026, 11, 30, 7, 21, 13, 797454167, time.UTC), Event: audit.EventGranted, Lock: "chaos-3", Token: 1<<63 + 1<<62, RemoteAddr: "127.0.0.1:55772"},
		{Line: 3, Time: time.Date(2026, 11, 30, 7, 21, 23, 810808771, time.UTC), Event: audit.EventReleased, Lock: "chaos-3", Token: 1<<63 + 1<<62, Reason: "shutdown", RemoteAddr: "127.0.0.1:55772"},
		{Line: 7, Time: time.Date(2026, 11, 30, 7, 21, 25, 0, time.UTC), Event: audit.EventDenied, Lock: "y", RemoteAddr: "[::1]:1"},
		{Line: 8, Time: time.Date(2026, 11, 30, 7, 21, 26, 0, time.UTC), Event: audit.EventGranted, Lock: "z", Token: 9}, // a last line without a newline
	}
	if len(events) != len(want) {
		t.Fatalf("read %d events, want %d: %+v", len(events), len(want), events)
	}
	for i := range want {
		if events[i] != want[i] {
			t.Errorf("event %d = %+v, want %+v", i, events[i], want[i])
		}
	}
	if len(bad) != 3 || bad[0].Line != 4 || bad[1].Line != 5 || bad[2].Line != 6 {
		t.Fatalf("bad lines %v, want lines 4, 5 and 6", bad)
	}
	if !strings.Contains(bad[2].Error(), `without a "token"`) {
		t.Errorf("bad line 6 says %q, want the missing token named", bad[2].Error())
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

func TestReadReturnsTheReadError(t *testing.T) {
	if _, _, err := Read(failingReader{}); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err = %v, want the reader's", err)
	}
}
