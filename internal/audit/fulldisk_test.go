package audit_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/monolock/monolock/internal/audit"
	"github.com/monolock/monolock/internal/auditcheck"
	"github.com/monolock/monolock/internal/testsupport/poll"
)

// safety bounds a wait for an event that should come at once; it only keeps
// a broken build from hanging the test run.
const safety = 30 * time.Second

// disk stands between the Log and its files and fills up on demand: in the
// middle of a chosen line (the kernel writes what fits, then says ENOSPC),
// or at once; it takes writes again once freed. Every file the Log opens
// shares it, as files on one file system share its space.
type disk struct {
	mu      sync.Mutex
	full    bool
	cutLine int           // > 0: the disk fills in the middle of this line, counted from 1 over every write
	lines   int           // lines written whole before cutLine
	enospc  chan struct{} // receives (without blocking) at each failed write
}

func newDisk(cutLine int) *disk { return &disk{cutLine: cutLine, enospc: make(chan struct{}, 1)} }

func (d *disk) wrap(w io.Writer) io.Writer { return diskFile{d, w} }

type diskFile struct {
	d *disk
	w io.Writer
}

func (f diskFile) Write(p []byte) (int, error) {
	d := f.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.full {
		return 0, d.fail()
	}
	if d.cutLine > 0 {
		pos := 0
		for {
			i := bytes.IndexByte(p[pos:], '\n')
			if i < 0 {
				break
			}
			if d.lines+1 == d.cutLine {
				n, err := f.w.Write(p[:pos+(i+1)/2])
				d.full, d.cutLine = true, 0
				if err != nil {
					return n, err
				}
				return n, d.fail()
			}
			d.lines++
			pos += i + 1
		}
	}
	return f.w.Write(p)
}

// fail says ENOSPC, and so that the test can await a failed write.
func (d *disk) fail() error {
	select {
	case d.enospc <- struct{}{}:
	default:
	}
	return syscall.ENOSPC
}

// awaitFailures waits for n more failed writes.
func (d *disk) awaitFailures(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-d.enospc:
		case <-time.After(safety):
			t.Fatal("no failed write")
		}
	}
}

// awaitWritten waits until the Log has written every event it kept and is
// healthy again, after the disk was freed. (Close right after freeing could
// meet a write that began while the disk was still full, and rightly call
// those events lost.) The Log's backlog has no event to await: it is polled.
func awaitWritten(t *testing.T, l *audit.Log) {
	t.Helper()
	poll.Eventually(t, safety, func() error {
		if n, err := l.PendingBytes(), l.Health(); n > 0 || err != nil {
			return fmt.Errorf("after the disk was freed: %d bytes pending, health %v", n, err)
		}
		return nil
	})
}

func (d *disk) fill(full bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.full = full
}

// clock is the reporter's clock, moved by the test.
type clock struct{ ns atomic.Int64 }

func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// record writes n audit events, lock names from first on, one per Write.
func record(l *audit.Log, first, n int) {
	r := audit.NewRecorder(l)
	remote := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4242}
	for i := range n {
		r.Denied(time.Unix(1_800_000_000, 0), fmt.Sprintf("lock-%03d", first+i), "", remote)
	}
}

// check runs audit-check on a file: every line must be an event.
func check(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rep, err := auditcheck.Check(f)
	if err != nil {
		t.Fatal(err)
	}
	if rep.BadLineCount > 0 || !rep.OK() {
		raw, _ := os.ReadFile(path)
		t.Errorf("audit-check %s: %d bad lines %v, %d violations; the file:\n%s", filepath.Base(path), rep.BadLineCount, rep.BadLines, rep.ViolationCount, raw)
	}
	return rep.Lines
}

// TestFullDiskMidEvent: the disk fills in the middle of the second of three
// events; then, while it is still full, the file is reopened in place
// (SIGHUP), rotated (rename and SIGHUP), or removed; then space is freed.
// Every event ends up whole in exactly one file, and audit-check passes on
// every file.
func TestFullDiskMidEvent(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, l *audit.Log, path string)
		files  map[string]int // events in each file: "" the path, ".1" the rotated one
	}{
		{"space freed", func(*testing.T, *audit.Log, string) {}, map[string]int{"": 3}},
		{"reopened in place while full, then freed", func(t *testing.T, l *audit.Log, path string) {
			if err := l.Reopen(); err != nil {
				t.Fatal(err)
			}
		}, map[string]int{"": 3}},
		{"rotated while full, then freed", func(t *testing.T, l *audit.Log, path string) {
			if err := os.Rename(path, path+".1"); err != nil {
				t.Fatal(err)
			}
			if err := l.Reopen(); err != nil {
				t.Fatal(err)
			}
		}, map[string]int{".1": 1, "": 2}},
		{"removed while full, then freed", func(t *testing.T, l *audit.Log, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}, map[string]int{"": 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.jsonl")
			d := newDisk(2)
			var clk clock
			l, err := audit.Open(path, audit.WithFaults(d.wrap, audit.MaxPending, time.Hour, clk.now))
			if err != nil {
				t.Fatal(err)
			}
			record(l, 1, 3)
			d.awaitFailures(t, 1)
			tc.change(t, l, path)
			// Two failures after the change: the writer has seen it and
			// written to the disk still full at least once.
			d.awaitFailures(t, 2)
			d.fill(false)
			awaitWritten(t, l)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			for suffix, want := range tc.files {
				if got := check(t, path+suffix); got != want {
					t.Errorf("%s holds %d events, want %d", filepath.Base(path+suffix), got, want)
				}
			}
		})
	}
}

// TestEveryEpisodeIsLogged: a first episode of failing writes gets its
// error line and its recovery line; a second one inside the report interval
// of those, in which events are dropped, is told when the interval is over,
// with the number of events it dropped.
func TestEveryEpisodeIsLogged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	d := newDisk(0)
	var clk clock
	clk.advance(time.Hour)
	diag := audit.NewLogLines()
	const limit = 4096 // bytes of events waiting before they are dropped
	l, err := audit.Open(path, audit.WithLogger(zerolog.New(diag)), audit.WithFaults(d.wrap, limit, 10*time.Second, clk.now))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()

	d.fill(true)
	record(l, 1, 1)
	d.awaitFailures(t, 1)
	diag.Await(t, "audit log failing")
	d.fill(false)
	if line := diag.Await(t, "audit log writes succeed again"); line["write_errors"] == float64(0) {
		t.Errorf("first recovery line %v: want its write errors", line)
	}

	// The second episode, 3 s later: the disk fills and events are dropped.
	clk.advance(3 * time.Second)
	select {
	case <-d.enospc: // the first episode's last failure
	default:
	}
	d.fill(true)
	record(l, 100, 1)
	d.awaitFailures(t, 1)
	for l.DroppedEvents() == 0 {
		record(l, 200, 10)
	}
	dropped := l.DroppedEvents()
	d.fill(false)
	// Writes succeed again: every event the Log kept reaches the file.
	awaitWritten(t, l)
	clk.advance(10 * time.Second)
	line := diag.Await(t, "audit log writes succeed again")
	if line["dropped_events"] != float64(dropped) || line["episodes"] != float64(1) || line["level"] != "warn" {
		t.Errorf("the second episode's line %v: want dropped_events %d, episodes 1, level warn", line, dropped)
	}
}
