package client

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/monolock/monolock/protocol"
)

// TestStep runs the rule scripts in testdata/step: each command is one event
// for the session's rules at a time given to the nanosecond, as an offset
// from the start; under ---- are the actions the step returned. Regenerate
// the expected output with go test ./client -run TestStep -rewrite, and read
// the diff.
//
//	start lease=D                  a new session; ACQUIRE goes out at 0
//	written at=T [err=deadline|broken]
//	frame at=T type=ACQUIRED|WAITING|0xNN [token=N]
//	reader-end at=T err=server|unknown-type|eof|reset|garbage
//	timer at=T                     the armed timer fired
//	close at=T                     Close: the work has stopped
//	expired at=T                   Valid saw the deadline pass
func TestStep(t *testing.T) {
	datadriven.Walk(t, "testdata/step", func(t *testing.T, path string) {
		var (
			m      machine
			base   = time.Unix(1_000_000, 0)
			closed = true
		)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd == "start" {
				var lease time.Duration
				scanDuration(t, d, "lease", &lease)
				leaseMS, err := protocol.LeaseMS(lease)
				if err != nil {
					d.Fatalf(t, "%v", err)
				}
				m, closed = newMachine("x", lease, leaseMS), false
				return printReady(&m, base, m.step(event{kind: evStart, at: base}))
			}
			if closed {
				d.Fatalf(t, "%s after the close: the session takes no more events", d.Cmd)
			}
			var at time.Duration
			scanDuration(t, d, "at", &at)
			ev := event{at: base.Add(at)}
			switch d.Cmd {
			case "written":
				ev.kind = evWritten
				if d.HasArg("err") {
					ev.err = scanError(t, d, map[string]error{
						"deadline": os.ErrDeadlineExceeded,
						"broken":   errors.New("broken pipe"),
					})
				}
			case "frame":
				ev.kind = evFrame
				ev.typ = scanType(t, d)
				if d.HasArg("token") {
					d.ScanArgs(t, "token", &ev.token)
				}
			case "reader-end":
				ev.kind = evReaderEnd
				ev.err = scanError(t, d, map[string]error{
					"server":       &ServerError{Code: protocol.CodeClosedByAdmin, Reason: "released by an operator"},
					"unknown-type": &ServerError{Code: protocol.CodeUnknownMessageType, Reason: "unknown message type: 0x03"},
					"eof":          readError(io.EOF),
					"reset":        readError(syscall.ECONNRESET),
					"garbage":      readError(fmt.Errorf("%w: 0x7f", protocol.ErrUnexpectedFrame)),
				})
			case "timer":
				ev.kind = evTimer
			case "close":
				ev.kind = evWorkStopped
			case "expired":
				ev.kind = evExpired
			default:
				d.Fatalf(t, "unknown command %q", d.Cmd)
			}
			r := m.step(ev)
			closed = r.close
			return printReady(&m, base, r)
		})
	})
}

// printReady lists one step's actions, one a line, in the order the session
// goroutine carries them out.
func printReady(m *machine, base time.Time, r ready) string {
	var b strings.Builder
	ts := func(t time.Time) string { return t.Sub(base).String() }
	if r.answered {
		b.WriteString("answered\n")
	}
	if r.granted {
		fmt.Fprintf(&b, "granted token=%d\n", m.token)
	}
	if !r.validUntil.IsZero() {
		fmt.Fprintf(&b, "valid-until %s\n", ts(r.validUntil))
	}
	if r.acked {
		fmt.Fprintf(&b, "ack heartbeat=%v rtt=%v srtt=%v interval=%v\n", r.ack.Heartbeat, r.ack.RTT, r.ack.SmoothedRTT, r.ack.Interval)
	}
	if r.end {
		cause := "released"
		if r.err != nil {
			cause = r.err.Error()
		}
		fmt.Fprintf(&b, "end: %s\n", cause)
	}
	if r.send != nil {
		what := "ACQUIRE"
		switch {
		case len(r.send) == protocol.HeartbeatLen && r.send[0] == byte(protocol.TypeHeartbeat):
			what = "HEARTBEAT"
		case len(r.send) == protocol.ReleaseLen && r.send[0] == byte(protocol.TypeRelease):
			what = "RELEASE"
		}
		fmt.Fprintf(&b, "send %s write-by=%s\n", what, ts(r.writeBy))
	}
	switch {
	case r.close && r.abort:
		b.WriteString("close abort\n")
	case r.close:
		b.WriteString("close\n")
	case r.timer.IsZero():
		b.WriteString("timer off\n")
	default:
		fmt.Fprintf(&b, "timer %s\n", ts(r.timer))
	}
	return b.String()
}

func scanDuration(t *testing.T, d *datadriven.TestData, key string, dst *time.Duration) {
	t.Helper()
	var s string
	d.ScanArgs(t, key, &s)
	v, err := time.ParseDuration(s)
	if err != nil {
		d.Fatalf(t, "%s=%s: %v", key, s, err)
	}
	*dst = v
}

func scanError(t *testing.T, d *datadriven.TestData, known map[string]error) error {
	t.Helper()
	var s string
	d.ScanArgs(t, "err", &s)
	err, ok := known[s]
	if !ok {
		d.Fatalf(t, "err=%s: not one of the script's errors", s)
	}
	return err
}

func scanType(t *testing.T, d *datadriven.TestData) protocol.Type {
	t.Helper()
	var s string
	d.ScanArgs(t, "type", &s)
	switch s {
	case "ACQUIRED":
		return protocol.TypeAcquired
	case "WAITING":
		return protocol.TypeWaiting
	}
	v, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 8)
	if err != nil {
		d.Fatalf(t, "type=%s: ACQUIRED, WAITING or a byte such as 0x7f", s)
	}
	return protocol.Type(v)
}
