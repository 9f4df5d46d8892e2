package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monolock/monolock/internal/testsupport/poll"
	"github.com/rs/zerolog"
)

// safety bounds a wait for an event that should come at once; it only keeps
// a broken build from hanging the test run.
const safety = 30 * time.Second

// logLines captures the Log's diagnostics, one decoded JSON line at a time.
type logLines chan map[string]any

func (c logLines) Write(p []byte) (int, error) {
	var line map[string]any
	if err := json.Unmarshal(p, &line); err != nil {
		return 0, err
	}
	c <- line
	return len(p), nil
}

// await returns the next line whose message contains substr.
func (c logLines) await(t *testing.T, substr string) map[string]any {
	t.Helper()
	timeout := time.After(safety)
	for {
		select {
		case line := <-c:
			if msg, _ := line["message"].(string); strings.Contains(msg, substr) {
				return line
			}
		case <-timeout:
			t.Fatalf("no log line containing %q", substr)
		}
	}
}

// drain returns the lines logged so far.
func (c logLines) drain() []map[string]any {
	var lines []map[string]any
	for {
		select {
		case line := <-c:
			lines = append(lines, line)
		default:
			return lines
		}
	}
}

func newLogLines() logLines { return make(logLines, 1000) }

func withOptions(f func(*options)) Option { return f }

// gate is a destination whose writes block until it is opened.
type gate struct {
	entered chan struct{} // receives once a write has begun
	open    chan struct{}
	mu      sync.Mutex
	got     bytes.Buffer
}

func newGate() *gate { return &gate{entered: make(chan struct{}, 1), open: make(chan struct{})} }

func (g *gate) Write(p []byte) (int, error) {
	select {
	case g.entered <- struct{}{}:
	default:
	}
	<-g.open
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.got.Write(p)
}

func (g *gate) String() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.got.String()
}

// flaky is a destination that fails while broken is set.
type flaky struct {
	mu      sync.Mutex
	broken  bool
	calls   int
	reached chan struct{} // closed at the callsWanted-th call
	want    int
	got     bytes.Buffer
}

func (f *flaky) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.calls == f.want {
		close(f.reached)
	}
	if f.broken {
		return 0, errors.New("disk on fire")
	}
	return f.got.Write(p)
}

func (f *flaky) repair() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.broken = false
}

// event is an audit line of exactly 100 bytes.
func event(i int) []byte {
	s := fmt.Sprintf(`{"event":"granted","n":%d}`, i)
	return []byte(s + strings.Repeat(" ", 99-len(s)) + "\n")
}

// TestWriteNeverBlocks: with the destination stuck, Write returns at once;
// past the limit it drops and counts events, Health says so, an error line
// names the problem, and a line reports the recovery with the loss.
func TestWriteNeverBlocks(t *testing.T) {
	dest, diag := newGate(), newLogLines()
	l := newLog("", dest, nil, []Option{WithLogger(zerolog.New(diag)), withOptions(func(o *options) {
		o.maxPending = 4096
		o.checkEvery = time.Hour // only state changes wake the reporter
	})})
	defer func() { _ = l.Close() }()

	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		for i := range 100 {
			_, _ = l.Write(event(i))
		}
	}()
	select {
	case <-wrote:
	case <-time.After(safety):
		t.Fatal("Write blocked on a stuck destination: it runs on the event loop and must never wait")
	}
	// Nothing leaves memory while the destination is stuck, so exactly the
	// first 40 lines (4000 of 4096 bytes) were kept.
	if got := l.DroppedEvents(); got != 60 {
		t.Errorf("DroppedEvents = %d, want 60", got)
	}
	if got := l.PendingBytes(); got != 4000 {
		t.Errorf("PendingBytes = %d, want 4000", got)
	}
	if err := l.Health(); err == nil || !strings.Contains(err.Error(), "audit backlog over its limit") {
		t.Errorf("Health = %v, want the backlog over its limit", err)
	}
	alarm := diag.await(t, "audit log failing")
	if alarm["level"] != "error" || alarm["audit_log"] != "stdout" || !strings.Contains(alarm["error"].(string), "over its limit") {
		t.Errorf("error line %v", alarm)
	}

	close(dest.open)
	back := diag.await(t, "succeed again")
	if back["level"] != "warn" || back["dropped_events"] != 60.0 {
		t.Errorf("recovery line %v, want a warning with dropped_events 60", back)
	}
	if err := l.Health(); err != nil {
		t.Errorf("Health after recovery = %v", err)
	}
	if _, err := l.Write(event(100)); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for _, i := range append(seq(40), 100) {
		want.Write(event(i))
	}
	if dest.String() != want.String() {
		t.Errorf("destination got %d bytes, want the first 40 lines and the one after recovery", len(dest.String()))
	}
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// TestFailingWritesAreReportedOnce: a failing destination is retried with
// the events kept; it is logged once per report interval, not per retry, and
// its recovery is logged too.
func TestFailingWritesAreReportedOnce(t *testing.T) {
	dest := &flaky{broken: true, want: 20, reached: make(chan struct{})}
	diag := newLogLines()
	l := newLog("", dest, nil, []Option{WithLogger(zerolog.New(diag)), withOptions(func(o *options) {
		o.retryEvery = time.Millisecond
		o.checkEvery = time.Millisecond // the reporter looks often; the interval must hold it back
	})})
	defer func() { _ = l.Close() }()
	if _, err := l.Write(event(1)); err != nil {
		t.Fatal(err)
	}
	alarm := diag.await(t, "audit log failing")
	select {
	case <-dest.reached:
	case <-time.After(safety):
		t.Fatal("the failed write was not retried")
	}
	if !strings.Contains(alarm["error"].(string), "audit log writes failing: disk on fire") {
		t.Errorf("error line %v does not name the cause", alarm)
	}
	if err := l.Health(); err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Errorf("Health = %v, want the write error", err)
	}
	if n := l.WriteErrors(); n < 19 {
		t.Errorf("WriteErrors = %d after 20 attempts", n)
	}
	if more := diag.drain(); len(more) != 0 {
		t.Errorf("%d more lines within the report interval: %v", len(more), more)
	}

	dest.repair()
	back := diag.await(t, "succeed again")
	if back["level"] != "info" || back["dropped_events"] != 0.0 || back["write_errors"].(float64) < 19 {
		t.Errorf("recovery line %v", back)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := dest.got.String(); got != string(event(1)) {
		t.Errorf("destination got %q, want the event kept through the failure", got)
	}
}

// TestBlockedWriteIsReported: a write that does not return is a failure
// too, though it reports no error.
func TestBlockedWriteIsReported(t *testing.T) {
	dest, diag := newGate(), newLogLines()
	l := newLog("", dest, nil, []Option{WithLogger(zerolog.New(diag)), withOptions(func(o *options) {
		o.blocked = time.Millisecond
		o.checkEvery = time.Millisecond
	})})
	defer func() { _ = l.Close() }()
	if _, err := l.Write(event(1)); err != nil {
		t.Fatal(err)
	}
	alarm := diag.await(t, "audit log failing")
	if !strings.Contains(alarm["error"].(string), "audit log write blocked for") {
		t.Errorf("error line %v", alarm)
	}
	close(dest.open)
	diag.await(t, "succeed again")
}

// TestCloseOnFullDiskSaysWhatWasLost: Close cannot flush to a failing
// destination and must not pretend it did.
func TestCloseOnFullDiskSaysWhatWasLost(t *testing.T) {
	l, err := Open("/dev/full")
	if err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	if _, err := l.Write(event(1)); err != nil {
		t.Fatal(err)
	}
	err = l.Close()
	if err == nil || !strings.Contains(err.Error(), "100 bytes of events not written") || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("Close = %v, want the lost bytes and the cause", err)
	}
}

// readLines returns the file's lines; a missing file has none.
func readLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(data) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

// awaitLines waits until the writer has put n lines in path.
func awaitLines(t *testing.T, path string, n int) {
	t.Helper()
	poll.Eventually(t, safety, func() error {
		if got := len(readLines(t, path)); got < n {
			return fmt.Errorf("%s: %d lines, want %d", path, got, n)
		}
		return nil
	})
}

// TestDeletedFileIsRecreated: rm without SIGHUP must not send the events
// that follow into a file nobody can read.
func TestDeletedFileIsRecreated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	diag := newLogLines()
	l, err := Open(path, WithLogger(zerolog.New(diag)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Write(event(1)); err != nil {
		t.Fatal(err)
	}
	awaitLines(t, path, 1)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Write(event(2)); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readLines(t, path); len(got) != 1 || got[0]+"\n" != string(event(2)) {
		t.Fatalf("after rm, %s holds %q; want the later event in a new file", path, got)
	}
	warn := diag.await(t, "deleted")
	if warn["level"] != "warn" || warn["audit_log"] != path {
		t.Errorf("warning %v", warn)
	}
}

// TestRenameThenReopen is log rotation: a renamed file keeps receiving
// events until Reopen, which starts a new file at the path.
func TestRenameThenReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Write(event(1)); err != nil {
		t.Fatal(err)
	}
	awaitLines(t, path, 1)
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Write(event(2)); err != nil {
		t.Fatal(err)
	}
	awaitLines(t, path+".1", 2)
	if err := l.Reopen(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Write(event(3)); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readLines(t, path+".1"); len(got) != 2 {
		t.Errorf("rotated file has %d lines, want 2", len(got))
	}
	if got := readLines(t, path); len(got) != 1 || got[0]+"\n" != string(event(3)) {
		t.Errorf("new file holds %q, want the event after Reopen", got)
	}
}

// TestReopenDoesNotWaitForAStuckWrite: Reopen must not wait for the
// destination: the reload that calls it would hold every later SIGHUP's
// reload behind a stuck write.
func TestReopenDoesNotWaitForAStuckWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	f, err := openFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dest := newGate()
	l := newLog(path, dest, f, nil)
	if _, err := l.Write(event(1)); err != nil {
		t.Fatal(err)
	}
	<-dest.entered
	reopened := make(chan error, 1)
	go func() { reopened <- l.Reopen() }()
	select {
	case err := <-reopened:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(safety):
		t.Fatal("Reopen waited for a stuck write")
	}
	close(dest.open)
	if _, err := l.Write(event(2)); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readLines(t, path); len(got) != 1 || got[0]+"\n" != string(event(2)) {
		t.Errorf("the reopened file holds %q, want the event after Reopen", got)
	}
}

// TestCloseFlushesEverything: every event accepted before Close is written.
func TestCloseFlushesEverything(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	const n = 20000 // 2 MB: several batches, under the limit
	for i := range n {
		if _, err := l.Write(event(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readLines(t, path); len(got) != n || l.DroppedEvents() != 0 {
		t.Fatalf("%d lines written, %d dropped; want %d and 0", len(got), l.DroppedEvents(), n)
	}
	if _, err := l.Write(event(0)); err == nil {
		t.Error("Write after Close succeeded")
	}
}

// TestFullDiskDoesNotBlockWrite is the production case of TestWriteNeverBlocks
// with the real limit: a full disk, more events than MaxPending holds.
func TestFullDiskDoesNotBlockWrite(t *testing.T) {
	l, err := Open("/dev/full")
	if err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	defer func() { _ = l.Close() }()
	// Twice the limit: the events the writer holds count against it too.
	const n = 2*MaxPending/100 + 1000
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		for i := range n {
			_, _ = l.Write(event(i))
		}
	}()
	select {
	case <-wrote:
	case <-time.After(safety):
		t.Fatal("Write blocked on a full disk: it runs on the event loop and must never wait")
	}
	if l.PendingBytes() > MaxPending || l.DroppedEvents() < n-MaxPending/100 {
		t.Errorf("pending %d bytes, dropped %d events; want at most %d and at least %d", l.PendingBytes(), l.DroppedEvents(), MaxPending, n-MaxPending/100)
	}
}

// TestPartialLastLineIsEnded: a previous process cut off mid-line (a full
// disk, a crash) leaves no newline at the end; the next one ends that line
// before its first event, on Open and on Reopen, and adds nothing to a file
// that ends properly.
func TestPartialLastLineIsEnded(t *testing.T) {
	for _, tc := range []struct{ name, before, want string }{
		{"partial last line", `{"event":"granted","lo`, "{\"event\":\"granted\",\"lo\n"},
		{"complete last line", "{\"event\":\"granted\"}\n", "{\"event\":\"granted\"}\n"},
		{"empty file", "", ""},
	} {
		for _, reopen := range []bool{false, true} {
			path := filepath.Join(t.TempDir(), "audit.jsonl")
			var l *Log
			var err error
			if reopen {
				if l, err = Open(path); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(path, []byte(tc.before), 0o640); err != nil {
				t.Fatal(err)
			}
			if reopen {
				err = l.Reopen()
			} else {
				l, err = Open(path)
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.Write(event(1)); err != nil {
				t.Fatal(err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if want := tc.want + string(event(1)); string(got) != want {
				t.Errorf("%s (reopen %v): file %q, want %q", tc.name, reopen, got, want)
			}
		}
	}
}
