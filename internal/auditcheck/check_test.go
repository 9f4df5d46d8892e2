package auditcheck

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/monolock/monolock/internal/audit"
)

// Tokens as the server issues them: unixSeconds << 32, so about 2^62; a
// float64 would round them.
const t0 = uint64(1767225600) << 32

// ev is one audit line in the server's field order.
func ev(event, lock, addr string, extra string) string {
	s := fmt.Sprintf(`{"time":"2026-01-01T00:00:01.5Z","event":%q,"lock":%q,"identity":"","remote_addr":%q`, event, lock, addr)
	if extra != "" {
		s += "," + extra
	}
	return s + "}"
}

func granted(lock, addr string, token uint64) string {
	return ev(audit.EventGranted, lock, addr, fmt.Sprintf(`"token":%d,"wait_ms":0`, token))
}

func released(lock, addr string, token uint64, reason string) string {
	return ev(audit.EventReleased, lock, addr, fmt.Sprintf(`"token":%d,"held_ms":12,"reason":%q`, token, reason))
}

func check(t *testing.T, lines ...string) (Report, error) {
	t.Helper()
	return Check(strings.NewReader(strings.Join(lines, "\n") + "\n"))
}

func TestCheckGoodHistory(t *testing.T) {
	rep, err := check(t,
		granted("nightly/import", "10.0.0.1:5000", t0+1),
		ev(audit.EventDenied, "secret", "10.0.0.9:5000", ""),
		granted("deploy", "10.0.0.2:5000", t0+2),
		released("nightly/import", "10.0.0.1:5000", t0+1, "graceful"),
		granted("nightly/import", "10.0.0.3:5000", t0+3), // promotion
		ev(audit.EventKickWaiter, "nightly/import", "10.0.0.4:5000", ""),
		ev(audit.EventForceRelease, "nightly/import", "10.0.0.3:5000", fmt.Sprintf(`"token":%d`, t0+3)),
		released("nightly/import", "10.0.0.3:5000", t0+3, "force"),
		"",
		`{"time":"2026-01-01T00:00:02Z","event":"something_new","extra":[1,2]}`, // unknown event: tolerated
		// A restart: its tokens start higher.
		granted("nightly/import", "10.0.0.1:5001", t0+(5<<32)),
		released("nightly/import", "10.0.0.1:5001", t0+(5<<32), "shutdown"),
		granted("nightly/import", "10.0.0.1:5002", t0+(5<<32)+1),
	)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("violations in a good history:\n%s", rep)
	}
	if rep.Lines != 12 || rep.MaxHeld != 2 || rep.Events[audit.EventGranted] != 5 || rep.Events[audit.EventReleased] != 3 ||
		rep.Events["something_new"] != 1 || rep.MaxToken != t0+(5<<32)+1 {
		t.Errorf("counts:\n%s", rep)
	}
	wantHeld := []Holding{
		{Lock: "deploy", Token: t0 + 2, RemoteAddr: "10.0.0.2:5000", Line: 3},
		{Lock: "nightly/import", Token: t0 + (5 << 32) + 1, RemoteAddr: "10.0.0.1:5002", Line: 13},
	}
	if fmt.Sprint(rep.StillHeld) != fmt.Sprint(wantHeld) {
		t.Errorf("still held %v, want %v", rep.StillHeld, wantHeld)
	}
	if rep.First.Format(time.RFC3339Nano) != "2026-01-01T00:00:01.5Z" || rep.Last.Format(time.RFC3339) != "2026-01-01T00:00:02Z" {
		t.Errorf("time range %v .. %v", rep.First, rep.Last)
	}
	s := rep.String()
	for _, want := range []string{"violations: none", "granted 5", "something_new 1", "still held: 2", fmt.Sprint(t0 + (5 << 32) + 1)} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
}

func TestCheckViolations(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lines []string
		line  int    // of the (first) violation
		want  string // in its text
	}{
		{"two holders", []string{
			granted("a", "h1:1", t0+1),
			granted("a", "h2:1", t0+2),
		}, 2, "two holders"},
		{"token going backwards", []string{
			granted("a", "h1:1", t0+5),
			released("a", "h1:1", t0+5, "graceful"),
			granted("b", "h2:1", t0+4),
		}, 3, fmt.Sprintf("token %d, not greater than token %d granted on line 1", t0+4, t0+5)},
		{"token repeated on another lock", []string{
			granted("a", "h1:1", t0+5),
			granted("b", "h2:1", t0+5),
		}, 2, "must strictly increase"},
		{"release of the wrong token", []string{
			granted("a", "h1:1", t0+1),
			released("a", "h1:1", t0+7, "graceful"),
		}, 2, fmt.Sprintf("released token %d, but the holder has token %d", t0+7, t0+1)},
		{"release without a holder", []string{
			granted("a", "h1:1", t0+1),
			released("a", "h1:1", t0+1, "graceful"),
			released("a", "h1:1", t0+1, "graceful"),
		}, 3, "without a holder"},
		{"force_release of the wrong token", []string{
			granted("a", "h1:1", t0+1),
			ev(audit.EventForceRelease, "a", "h1:1", fmt.Sprintf(`"token":%d`, t0)),
		}, 2, "force_release of token"},
		{"force_release of an idle lock", []string{
			ev(audit.EventForceRelease, "a", "h1:1", fmt.Sprintf(`"token":%d`, t0)),
		}, 1, "without a holder"},
		{"token zero", []string{
			granted("a", "h1:1", 0),
		}, 1, "never 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := check(t, tc.lines...)
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK() {
				t.Fatalf("no violation found:\n%s", rep)
			}
			v := rep.Violations[0]
			if v.Line != tc.line || !strings.Contains(v.What, tc.want) {
				t.Fatalf("first violation %q, want line %d with %q", v, tc.line, tc.want)
			}
			if s := rep.String(); !strings.Contains(s, fmt.Sprintf("line %d: lock ", tc.line)) {
				t.Errorf("report does not name the line:\n%s", s)
			}
		})
	}
}

// TestCheckContinuesAfterViolation: checking goes on after a violation, so one
// run lists them all.
func TestCheckContinuesAfterViolation(t *testing.T) {
	rep, err := check(t,
		granted("a", "h1:1", t0+1),
		granted("a", "h2:1", t0+2), // two holders
		released("a", "h2:1", t0+2, "graceful"),
		granted("a", "h3:1", t0+1),              // backwards
		released("a", "h3:1", t0+9, "graceful"), // wrong token
	)
	if err != nil {
		t.Fatal(err)
	}
	var lines []int
	for _, v := range rep.Violations {
		lines = append(lines, v.Line)
	}
	if fmt.Sprint(lines) != "[2 4 5]" {
		t.Fatalf("violations on lines %v, want [2 4 5]:\n%s", lines, rep)
	}
}

func TestCheckMalformed(t *testing.T) {
	for _, tc := range []struct {
		name, line, want string
	}{
		{"not JSON", `{"time":"2026-01-01T00:00:01Z","event":"granted"`, "not a JSON audit event"},
		{"not an object", `[1,2]`, "not a JSON audit event"},
		{"no event", `{"time":"2026-01-01T00:00:01Z","lock":"a"}`, `no "event"`},
		{"no time", `{"event":"granted","lock":"a","token":1}`, `no "time"`},
		{"bad time", `{"time":"yesterday","event":"granted","lock":"a","token":1}`, "RFC 3339"},
		{"granted without token", ev(audit.EventGranted, "a", "h:1", ""), `without a "token"`},
		{"released without lock", `{"time":"2026-01-01T00:00:01Z","event":"released","token":1}`, `without a "lock"`},
		{"negative token", ev(audit.EventGranted, "a", "h:1", `"token":-1`), "not a JSON audit event"},
		{"token beyond uint64", ev(audit.EventGranted, "a", "h:1", `"token":18446744073709551616`), "not a JSON audit event"},
		{"token as float", ev(audit.EventGranted, "a", "h:1", `"token":1.5`), "not a JSON audit event"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := check(t, granted("z", "h:1", t0), "", tc.line, granted("y", "h:1", t0+1), granted("y", "h:2", t0+2))
			if err != nil {
				t.Fatal(err)
			}
			if rep.BadLineCount != 1 || len(rep.BadLines) != 1 {
				t.Fatalf("bad lines %d, want 1:\n%s", rep.BadLineCount, rep)
			}
			le := &rep.BadLines[0]
			if le.Line != 3 || !strings.Contains(le.Error(), tc.want) || !strings.HasPrefix(le.Error(), "line 3: ") {
				t.Fatalf("bad line %v, want line 3 mentioning %q", le, tc.want)
			}
			// The check went on after the bad line: it found the two holders.
			if rep.Lines != 3 || len(rep.StillHeld) != 2 || rep.ViolationCount != 1 || rep.Violations[0].Line != 5 {
				t.Errorf("report past the bad line:\n%s", rep)
			}
			if s := rep.String(); !strings.Contains(s, "bad lines:  1") || !strings.Contains(s, "line 3: ") {
				t.Errorf("report does not list the bad line:\n%s", s)
			}
		})
	}
}

func TestCheckLongLine(t *testing.T) {
	long := ev("note", "a", "h:1", `"pad":"`+strings.Repeat("x", MaxLineLen)+`"`)
	rep, err := check(t, granted("a", "h:1", t0), long, released("a", "h:1", t0, "graceful"))
	if err != nil {
		t.Fatal(err)
	}
	if rep.BadLineCount != 1 || rep.BadLines[0].Line != 2 || !strings.Contains(rep.BadLines[0].Error(), "longer than") {
		t.Fatalf("bad lines %v, want line 2, too long", rep.BadLines)
	}
	if rep.Lines != 2 || !rep.OK() || len(rep.StillHeld) != 0 {
		t.Fatalf("the line after the long one was not checked:\n%s", rep)
	}
}

// TestCheckPartialLineThenRestart: a server that died mid-line and a successor
// whose first event ended up on a line of its own (the audit log ends the
// partial line): the bad line is reported and the grants after it are checked.
func TestCheckPartialLineThenRestart(t *testing.T) {
	rep, err := check(t,
		granted("a", "h:1", t0+1),
		`{"time":"2026-01-01T00:00:01.5Z","event":"rele`,
		granted("b", "h:1", t0+(5<<32)),
		granted("b", "h:2", t0+(5<<32)-1),
	)
	if err != nil {
		t.Fatal(err)
	}
	if rep.BadLineCount != 1 || rep.ViolationCount != 2 {
		t.Fatalf("want 1 bad line and 2 violations (two holders, token backwards):\n%s", rep)
	}
}

// TestCheckListsAreBounded: a file full of violations and bad lines lists the
// first MaxListed of each and counts the rest.
func TestCheckListsAreBounded(t *testing.T) {
	var b strings.Builder
	for i := range MaxListed + 10 {
		fmt.Fprintln(&b, released("a", "h:1", t0+uint64(i), "graceful")) // no holder
		fmt.Fprintln(&b, "junk")
	}
	rep, err := Check(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if rep.ViolationCount != MaxListed+10 || len(rep.Violations) != MaxListed ||
		rep.BadLineCount != MaxListed+10 || len(rep.BadLines) != MaxListed {
		t.Fatalf("violations %d (%d listed), bad lines %d (%d listed)", rep.ViolationCount, len(rep.Violations), rep.BadLineCount, len(rep.BadLines))
	}
	if s := rep.String(); !strings.Contains(s, "... and 10 more") {
		t.Errorf("report does not count the rest")
	}
}

// manyNames generates grant/release pairs of distinct lock names, and
// measures the live heap (after a GC) when the first and the last line are
// read, while Check runs.
type manyNames struct {
	pairs, next int
	pending     []byte
	heapAt      [2]uint64
}

func (m *manyNames) Read(p []byte) (int, error) {
	if len(m.pending) == 0 {
		if m.next == m.pairs {
			return 0, io.EOF
		}
		if m.next == 0 || m.next == m.pairs-1 {
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			m.heapAt[min(m.next, 1)] = ms.HeapAlloc
		}
		name := fmt.Sprintf("jobs/%012d/%s", m.next, strings.Repeat("n", 40))
		tok := t0 + uint64(m.next) + 1
		m.pending = []byte(granted(name, "10.0.0.1:5000", tok) + "\n" + released(name, "10.0.0.1:5000", tok, "graceful") + "\n")
		m.next++
	}
	n := copy(p, m.pending)
	m.pending = m.pending[n:]
	return n, nil
}

// TestCheckMemoryFollowsHeldLocks: a checker that kept every name would hold
// 100,000 names of 57 bytes, over 5 MB with the map; one that forgets a
// released lock holds about nothing more at the end than at the start.
func TestCheckMemoryFollowsHeldLocks(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 200,000 lines")
	}
	m := &manyNames{pairs: 100_000}
	rep, err := Check(m)
	if err != nil || !rep.OK() || rep.MaxHeld != 1 || rep.Lines != 200_000 {
		t.Fatalf("%v\n%s", err, rep)
	}
	grew := int64(m.heapAt[1]) - int64(m.heapAt[0])
	t.Logf("live heap grew by %d bytes over 100,000 names", grew)
	if grew > 2<<20 {
		t.Fatalf("live heap grew by %d bytes over 100,000 lock names; want it bounded by the locks held at once", grew)
	}
}

func TestCheckEmpty(t *testing.T) {
	rep, err := Check(bytes.NewReader(nil))
	if err != nil || !rep.OK() || rep.Lines != 0 {
		t.Fatalf("empty input: %v\n%s", err, rep)
	}
	if s := rep.String(); !strings.Contains(s, "events:     0 (granted 0, released 0,") {
		t.Errorf("report:\n%s", s)
	}
}

// TestCheckRecorderOutput: the lines the Recorder writes pass the checker.
func TestCheckRecorderOutput(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	log, err := audit.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	rec := audit.NewRecorder(log)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const lock = "nightly/import"
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5000}
	rec.Granted(now, lock, "", addr, t0+1, 0)
	rec.ForceRelease(now, lock, "", addr, t0+1, "spiffe://prod/oncall/ana")
	rec.Released(now, lock, "", addr, t0+1, time.Second, "force")
	rec.KickWaiter(now, lock, "", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5001}, "spiffe://prod/oncall/bo")
	rec.Denied(now, "secret", "cn=x", nil)
	rec.Granted(now.Add(time.Second), lock, "", addr, t0+2, time.Second)
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rep, err := Check(f)
	if err != nil || !rep.OK() || rep.Lines != 6 || rep.MaxHeld != 1 || rep.MaxToken != t0+2 {
		t.Fatalf("%v\n%s", err, rep)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	events, bad, err := Read(f)
	if err != nil || len(bad) != 0 || len(events) != 6 {
		t.Fatalf("Read: %d events, bad %v, %v", len(events), bad, err)
	}
	if events[1].Operator != "spiffe://prod/oncall/ana" || events[3].Operator != "spiffe://prod/oncall/bo" || events[0].Operator != "" {
		t.Errorf("operators read back: %q, %q, %q; want the force_release's and the kick_waiter's", events[0].Operator, events[1].Operator, events[3].Operator)
	}
}
