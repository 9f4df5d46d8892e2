package client

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/monolock/monolock/protocol"
)

// stepScripts are the client step's scripts every client runs: the events
// and actions of docs/protocol.md, "The client step", one command per event
// at a time given to the nanosecond. protocol/testdata/step/README.md
// explains the format and how to rewrite the expected output (go test
// ./client -run TestStep -rewrite, then read the diff).
const stepScripts = "../protocol/testdata/step"

// knownStepFailures lists the scripts' sessions the Go step does not pass
// yet, each with the reason; see loadKnownStepFailures.
const knownStepFailures = "testdata/step-known-failures.txt"

// TestStep runs the step scripts against the Go client's machine (with the
// reader's part: an ERROR, an unknown frame type, a TLS alert and the end
// of the stream reach the machine as the reader's end). A session listed in
// testdata/step-known-failures.txt must still differ from the script (the
// difference is logged, the script's expected output kept under -rewrite);
// when it stops differing, the test fails until the entry is removed.
func TestStep(t *testing.T) {
	known := loadKnownStepFailures(t)
	files, err := filepath.Glob(filepath.Join(stepScripts, "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no step scripts in %s (%v)", stepScripts, err)
	}
	for _, path := range files {
		file := filepath.Base(path)
		t.Run(strings.TrimSuffix(file, ".txt"), func(t *testing.T) {
			r := &stepRunner{base: time.Unix(1_000_000, 0), closed: true}
			differs := map[int]int{} // listed session start line → cases that differ
			starts := map[int]bool{}
			datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
				line := posLine(t, d.Pos)
				if d.Cmd == "dial" || d.Cmd == "start" && d.HasArg("lease") {
					r.session = line
					starts[line] = true
				}
				out := r.run(t, d)
				reason, listed := known[file][r.session]
				if !listed {
					return out
				}
				if out != d.Expected {
					differs[r.session]++
					t.Logf("%s: known failure (%s):\n%s\ngot:\n%s", d.Pos, reason, d.Expected, out)
				}
				return d.Expected
			})
			for line := range known[file] {
				if !starts[line] {
					t.Errorf("%s:%d is listed in %s, but no session starts there (a dial, or a start with lease=)", file, line, knownStepFailures)
				} else if differs[line] == 0 {
					t.Errorf("%s:%d is listed in %s, but the Go step now passes the session: remove the entry", file, line, knownStepFailures)
				}
			}
		})
	}
	for file := range known {
		if _, err := os.Stat(filepath.Join(stepScripts, file)); err != nil {
			t.Errorf("%s names %s, which is not a step script", knownStepFailures, file)
		}
	}
}

// loadKnownStepFailures reads the allow-list: "FILE:LINE reason" a line,
// LINE the line of the session's start (or dial) command; # comments.
func loadKnownStepFailures(t *testing.T) map[string]map[int]string {
	t.Helper()
	f, err := os.Open(knownStepFailures)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	known := map[string]map[int]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		where, reason, ok := strings.Cut(text, " ")
		file, lineText, ok2 := strings.Cut(where, ":")
		line, err := strconv.Atoi(lineText)
		if !ok || !ok2 || err != nil || strings.TrimSpace(reason) == "" {
			t.Fatalf("%s:%d: want FILE:LINE and a reason, got %q", knownStepFailures, n, text)
		}
		if known[file] == nil {
			known[file] = map[int]string{}
		}
		known[file][line] = strings.TrimSpace(reason)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return known
}

func posLine(t *testing.T, pos string) int {
	t.Helper()
	i := strings.LastIndexByte(pos, ':')
	line, err := strconv.Atoi(pos[i+1:])
	if i < 0 || err != nil {
		t.Fatalf("datadriven position %q has no line", pos)
	}
	return line
}

// stepRunner carries one script's session from command to command.
type stepRunner struct {
	m       machine
	base    time.Time
	lease   time.Duration
	session int  // the line of the session's start command
	closed  bool // the last step closed: the machine takes no more events
}

func (r *stepRunner) run(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "dial":
		return r.dial(t, d)
	case "start":
		if d.HasArg("lease") {
			return r.start(t, d)
		}
	}
	if r.closed {
		return "error: " + d.Cmd + " after the close: the session takes no more events\n"
	}
	at := r.base.Add(scanDuration(t, d, "at"))
	if d.Cmd == "frame" {
		return r.frames(t, d, at)
	}
	ev := event{at: at}
	switch d.Cmd {
	case "written":
		ev.kind = evWritten
		if d.HasArg("err") {
			ev.err = scanError(t, d, map[string]error{
				"deadline": os.ErrDeadlineExceeded,
				"broken":   errors.New("broken pipe"),
			})
		}
	case "closed":
		ev.kind = evReaderEnd
		ev.err = scanError(t, d, map[string]error{
			"eof":    readError(io.EOF),
			"broken": readError(errors.New("connection reset by peer")),
			"tls":    readError(&net.OpError{Op: "remote error", Err: errors.New("tls: bad certificate")}),
		})
	case "timer":
		ev.kind = evTimer
	case "start":
		// The connection of a dial comes up.
		ev.kind = evStart
	case "stop":
		ev.kind = evWorkStopped
	case "expired":
		ev.kind = evExpired
	default:
		d.Fatalf(t, "unknown event %q: docs/protocol.md, The client step, lists the events", d.Cmd)
	}
	return r.print(r.step(ev))
}

// attempt reads the parameters of a session's first command: lease=,
// and wait= and connect-timeout= when given. ok is false, with the
// output, for a lease the protocol cannot carry.
func (r *stepRunner) attempt(t *testing.T, d *datadriven.TestData) (a attempt, out string, ok bool) {
	r.closed = true
	r.lease = scanDuration(t, d, "lease")
	leaseMS, err := protocol.LeaseMS(r.lease)
	if err != nil {
		return a, "failed invalid-input retry=no\n", false
	}
	a = attempt{name: "x", lease: r.lease, leaseMS: leaseMS, wait: waitForever, target: "127.0.0.1:7070"}
	if d.HasArg("wait") {
		a.wait = scanDuration(t, d, "wait")
	}
	if d.HasArg("connect-timeout") {
		a.connectTimeout = scanDuration(t, d, "connect-timeout")
	}
	return a, "", true
}

// dial begins a session with its connect phase, at 0.
func (r *stepRunner) dial(t *testing.T, d *datadriven.TestData) string {
	a, out, ok := r.attempt(t, d)
	if !ok {
		return out
	}
	r.m = newMachine(a)
	return r.print(r.step(event{kind: evDial, at: r.base}))
}

// start begins a session whose connection is up at at= (0 by default).
func (r *stepRunner) start(t *testing.T, d *datadriven.TestData) string {
	a, out, ok := r.attempt(t, d)
	if !ok {
		return out
	}
	var at time.Duration
	if d.HasArg("at") {
		at = scanDuration(t, d, "at")
	}
	r.m = newMachine(a)
	return r.print(r.step(event{kind: evStart, at: r.base.Add(at)}))
}

// frames steps each frame of one read at the same time; the read's actions
// are those of every step, with the last step's wake or close.
func (r *stepRunner) frames(t *testing.T, d *datadriven.TestData, at time.Time) string {
	arg, _ := d.Arg("type")
	if len(arg.Vals) == 0 {
		d.Fatalf(t, "frame needs type=")
	}
	var tokens, codes []string
	if a, ok := d.Arg("token"); ok {
		tokens = a.Vals
	}
	if a, ok := d.Arg("code"); ok {
		codes = a.Vals
	}
	var b strings.Builder
	var last string
	for i, typ := range arg.Vals {
		if r.closed {
			break
		}
		ev := event{kind: evFrame, at: at, more: i < len(arg.Vals)-1}
		switch typ {
		case "ACQUIRED":
			ev.typ = protocol.TypeAcquired
			if len(tokens) == 0 {
				d.Fatalf(t, "each ACQUIRED needs its token=, in order")
			}
			v, err := strconv.ParseUint(tokens[0], 10, 64)
			if err != nil {
				d.Fatalf(t, "token=%s: %v", tokens[0], err)
			}
			ev.token, tokens = v, tokens[1:]
		case "WAITING":
			ev.typ = protocol.TypeWaiting
		case "ERROR":
			if len(codes) == 0 {
				d.Fatalf(t, "each ERROR needs its code=0xNN, in order")
			}
			v, err := strconv.ParseUint(strings.TrimPrefix(codes[0], "0x"), 16, 8)
			if err != nil {
				d.Fatalf(t, "code=%s: %v", codes[0], err)
			}
			codes = codes[1:]
			// The reader decodes the ERROR and ends with it.
			ev.kind, ev.err = evReaderEnd, &ServerError{Code: protocol.Code(v)}
		default:
			v, err := strconv.ParseUint(strings.TrimPrefix(typ, "0x"), 16, 8)
			if err != nil {
				d.Fatalf(t, "type=%s: ACQUIRED, WAITING, ERROR or a byte such as 0x7f", typ)
			}
			// The reader stops at a type the protocol does not have.
			ev.kind, ev.err = evReaderEnd, readError(fmt.Errorf("%w: 0x%02x", protocol.ErrUnexpectedFrame, v))
		}
		out := r.print(r.step(ev))
		i := strings.LastIndexByte(strings.TrimSuffix(out, "\n"), '\n')
		b.WriteString(out[:i+1])
		last = out[i+1:]
	}
	b.WriteString(last)
	return b.String()
}

func (r *stepRunner) step(ev event) ready {
	rd := r.m.step(ev)
	r.closed = rd.close
	return rd
}

// print lists one step's actions in the spec's words, one a line, in the
// order the session goroutine carries them out.
func (r *stepRunner) print(rd ready) string {
	var b strings.Builder
	ts := func(t time.Time) string { return t.Sub(r.base).String() }
	if rd.answered && !rd.granted {
		b.WriteString("waiting\n")
	}
	if rd.granted {
		fmt.Fprintf(&b, "granted token=%d\n", r.m.token)
	}
	if !rd.validUntil.IsZero() {
		fmt.Fprintf(&b, "valid-until %s\n", ts(rd.validUntil))
	}
	if rd.acked {
		fmt.Fprintf(&b, "ack rtt=%v srtt=%v interval=%v\n", rd.ack.RTT, rd.ack.SmoothedRTT, rd.ack.Interval)
	}
	if rd.end && rd.err != nil {
		if r.m.state == stateHeld {
			fmt.Fprintf(&b, "lost %s\n", stepReason(rd.err))
		} else {
			fmt.Fprintf(&b, "failed %s retry=%s\n", stepReason(rd.err), r.retry(rd.err))
		}
	}
	if rd.send != nil {
		what := "ACQUIRE"
		switch {
		case len(rd.send) == protocol.HeartbeatLen && rd.send[0] == byte(protocol.TypeHeartbeat):
			what = "HEARTBEAT"
		case len(rd.send) == protocol.ReleaseLen && rd.send[0] == byte(protocol.TypeRelease):
			what = "RELEASE"
		}
		if what == "ACQUIRE" {
			what = fmt.Sprintf("ACQUIRE lease-ms=%d", binary.BigEndian.Uint32(rd.send[2:6]))
		}
		fmt.Fprintf(&b, "send %s\n", what)
	}
	switch {
	case rd.close && rd.abort:
		b.WriteString("abort\n")
	case rd.close:
		b.WriteString("close\n")
	case rd.timer.IsZero():
		b.WriteString("wake off\n")
	default:
		fmt.Fprintf(&b, "wake %s\n", ts(rd.timer))
	}
	return b.String()
}

// stepReason names why a session ended, in the spec's words.
func stepReason(err error) string {
	var se *ServerError
	var de *dialError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("server code=0x%02x", uint8(se.Code))
	case errors.Is(err, ErrBusy):
		return "busy"
	case errors.Is(err, ErrHeartbeatTimeout):
		return "timeout"
	case errors.Is(err, ErrProtocolViolation):
		return "protocol"
	case errors.Is(err, ErrTLSRefused):
		return "tls"
	case errors.As(err, &de):
		return "connect"
	case errors.Is(err, ErrConnectionClosed):
		return "closed"
	}
	return "unclassified: " + err.Error()
}

// retry is what DoRetry does after a failed attempt: nothing, its backoff,
// or after 0x01 a uniform wait whose upper bound this prints.
func (r *stepRunner) retry(err error) string {
	switch {
	case !transient(err):
		return "no"
	case errors.Is(err, protocol.ErrShuttingDown):
		return "random-wait max=" + shutdownJitter(r.lease, func(n int64) int64 { return n - 1 }).String()
	}
	return "backoff"
}

func scanDuration(t *testing.T, d *datadriven.TestData, key string) time.Duration {
	t.Helper()
	var s string
	d.ScanArgs(t, key, &s)
	v, err := time.ParseDuration(s)
	if err != nil {
		d.Fatalf(t, "%s=%s: %v", key, s, err)
	}
	return v
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
