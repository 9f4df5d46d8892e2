// Package audit writes the audit stream: one JSON line per ownership change.
//
// The owner loop appends encoded lines to a memory buffer; a goroutine of the
// Log writes the buffer out at most every 10 ms, so an event costs the owner
// no syscall and no goroutine wake-up of its own.
//
// Write never blocks its caller, whatever the destination does. The caller is
// the event loop, and a full disk, a hung mount or a stdout nobody reads must
// not stop every lock in the server. A failed write keeps its events and is
// retried every 100 ms; new events wait in memory meanwhile. Once MaxPending
// bytes wait, new events are dropped and counted instead: lock traffic goes
// on, and its record has a hole. The loss is loud: Health returns the cause
// (the server's /readyz answers 503), DroppedEvents and WriteErrors count it,
// and the Log's logger says so: every episode of failing writes or dropped
// events gets its lines, an error line when it starts (at most one per
// ReportInterval, so a flapping disk cannot flood the diagnostics) and a line
// with its counts when writes succeed again; an episode that begins and ends
// inside the interval of an earlier line is told by a line at the end of
// that interval, with its counts, never left out.
//
// The file never holds half an event followed by anything else: a write cut
// short by a full disk leaves the head of an event at the end of the file,
// and the writer finishes that event there before anything else is written.
// When the file changes under it (SIGHUP's Reopen, or the file deleted and
// created again), the writer finishes the event on the old file if it can,
// and otherwise cuts the head off the old file and writes the whole event to
// the new one, so that neither file holds a fragment.
package audit

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

// MaxPending is how far, in bytes, the stream may run ahead of the disk
// before new events are dropped. At roughly 200 bytes a line it is some
// 40,000 events, a few seconds of a busy server.
const MaxPending = 8 << 20

// ReportInterval is the least time between two error lines about one
// failing destination: a full disk must not flood the diagnostics.
const ReportInterval = 10 * time.Second

// flushDelay is how long an event may wait in memory before it is written.
const flushDelay = 10 * time.Millisecond

// retryWrite is the pause before a failed write to the destination is tried
// again; the events stay buffered meanwhile.
const retryWrite = 100 * time.Millisecond

// blockedAfter is how long one write may take before the destination counts
// as stuck (a hung mount, a pipe nobody reads) rather than slow.
const blockedAfter = 5 * time.Second

// Log is an audit destination: a file (reopened on Reopen) or stdout.
type Log struct {
	path string // "" for stdout
	opts options

	mu          sync.Mutex
	pending     []byte // encoded lines not yet handed to the writer
	inFlight    int    // bytes the writer took and has not written yet
	closed      bool
	failing     error     // the last write error, nil once a write succeeds
	dropping    bool      // an event was dropped and the writer has not made room since
	dropped     uint64    // events dropped over the limit
	writeErrors uint64    // failed writes to the destination
	writeSince  time.Time // start of the write in progress; zero when none is
	lost        int       // bytes given up on because the log closed while failing
	lostCause   error     // the write error that made them lost
	next        *os.File  // opened by Reopen for the writer to switch to
	episodes    uint64    // times writes began to fail or events began to be dropped

	wake    chan struct{} // cap 1: there is something to write
	closing chan struct{} // closed by Close: stop waiting to retry
	done    chan struct{} // closed when the writer goroutine has exited
	notify  chan struct{} // cap 1: the health may have changed
	stop    chan struct{} // closed when the reporter must exit
	stopped chan struct{} // closed when the reporter has exited

	// Only the writer goroutine uses these, and Close once it has exited.
	out  io.Writer
	file *os.File // nil for stdout
}

// Option configures Open.
type Option func(*options)

type options struct {
	log         zerolog.Logger
	maxPending  int
	reportEvery time.Duration
	retryEvery  time.Duration
	checkEvery  time.Duration
	blocked     time.Duration
	// wrap stands between the writer and each file it opens; the tests make
	// it fail on demand (a full disk in the middle of an event).
	wrap func(io.Writer) io.Writer
	now  func() time.Time // the reporter's clock
}

// WithLogger sends the Log's own diagnostics to log: failing writes, dropped
// events, recovery, a deleted file recreated. Without it they are discarded,
// and only Health and the counters tell.
func WithLogger(log zerolog.Logger) Option {
	return func(o *options) { o.log = log }
}

// Open starts an audit stream to dest: a file path (appended to, created
// 0640 if missing) or "-" for stdout.
func Open(dest string, opts ...Option) (*Log, error) {
	if dest == "-" {
		return newLog("", os.Stdout, nil, opts), nil
	}
	f, err := openFile(dest)
	if err != nil {
		return nil, err
	}
	if err := endLine(f, dest); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	return newLog(dest, f, f, opts), nil
}

func newLog(path string, out io.Writer, file *os.File, opts []Option) *Log {
	o := options{log: zerolog.Nop(), maxPending: MaxPending, reportEvery: ReportInterval, retryEvery: retryWrite, checkEvery: time.Second, blocked: blockedAfter,
		wrap: func(w io.Writer) io.Writer { return w }, now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	l := &Log{
		path: path, opts: o, out: o.wrap(out), file: file,
		wake: make(chan struct{}, 1), closing: make(chan struct{}), done: make(chan struct{}),
		notify: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{}),
	}
	go l.writeLoop()
	go l.reportLoop()
	return l
}

// openFile opens the audit file for appending without waiting: O_NONBLOCK
// makes the open of a FIFO nobody reads fail at once (ENXIO) instead of
// hanging SIGHUP's reload until a reader comes. A FIFO with a reader, or a
// device such as /dev/full, is accepted: the audit file is written, never
// read whole.
func openFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NONBLOCK, 0o640)
	if errors.Is(err, syscall.ENXIO) {
		return nil, fmt.Errorf("open audit log: %w: %s is a FIFO that no process reads; start its reader first, or name a regular file", err, path)
	}
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	return f, nil
}

// endLine appends a newline when the file does not end in one. A write cut
// short (a full disk, a crash) leaves a partial last line; without the newline
// the next process would glue its first event onto it and spoil both lines
// for every reader. A file that cannot be read back is left as it is.
func endLine(f *os.File, path string) error {
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return nil
	}
	r, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer r.Close()
	var last [1]byte
	if _, err := r.ReadAt(last[:], fi.Size()-1); err != nil || last[0] == '\n' {
		return nil
	}
	if _, err := f.Write([]byte{'\n'}); err != nil {
		return fmt.Errorf("ending the partial last line of %s: %w", path, err)
	}
	return nil
}

// Write appends encoded lines, one event per call. It never blocks on the
// destination: past MaxPending the event is dropped and counted. It reports
// no error for a dropped event, because its caller, zerolog, would print one
// line per event; the Log reports the loss itself.
func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, errors.New("audit log is closed")
	}
	if len(l.pending)+l.inFlight+len(p) > l.opts.maxPending {
		l.dropped++
		if !l.dropping {
			l.dropping = true
			if l.failing == nil {
				l.episodes++ // from healthy to dropping (behind a stuck or a first write)
			}
			l.poke(l.notify)
		}
		return len(p), nil
	}
	if len(l.pending) == 0 {
		l.poke(l.wake) // under mu, so that Close cannot close wake in between
	}
	l.pending = append(l.pending, p...)
	return len(p), nil
}

// poke sends on a channel of capacity 1 without waiting.
func (l *Log) poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// writeLoop hands pending lines to the destination, one write per batch.
func (l *Log) writeLoop() {
	defer close(l.done)
	var batch []byte
	for range l.wake {
		// Let a batch gather: one wake-up and one write per flushDelay at
		// most, however busy the owner is.
		time.Sleep(flushDelay)
		for {
			l.mu.Lock()
			batch, l.pending = l.pending, batch[:0]
			l.inFlight = len(batch)
			closed := l.closed
			l.mu.Unlock()
			if len(batch) == 0 {
				// A Reopen with nothing to write: switch now, so that the
				// old file is closed at once. (A deleted file is created
				// again only when there is an event for it.)
				if next := l.takeNext(); next != nil {
					l.switchTo(next, nil, 0)
				}
				if closed {
					return
				}
				break
			}
			l.writeAll(batch)
		}
	}
}

// writeAll writes batch, retrying a failing destination until it succeeds or
// the log is closed. Between attempts the file may change (a Reopen, the
// file deleted); switchIfChanged takes care of an event cut in two.
func (l *Log) writeAll(batch []byte) {
	off := 0 // bytes of batch the current file has taken
	for {
		var err error
		off, err = l.switchIfChanged(batch, off)
		if err == nil {
			l.mu.Lock()
			l.writeSince = time.Now()
			l.mu.Unlock()
			var n int
			n, err = l.out.Write(batch[off:])
			off += n
		}
		l.mu.Lock()
		l.writeSince = time.Time{}
		l.inFlight = len(batch) - off
		if err != nil {
			l.writeErrors++
			if l.failing == nil && !l.dropping {
				l.episodes++ // from healthy to failing
			}
		}
		if (err == nil) != (l.failing == nil) || (err == nil && l.dropping) {
			l.poke(l.notify)
		}
		l.failing = err
		if err == nil {
			l.dropping = false // the write made room
		}
		closed := l.closed
		if err != nil && closed {
			l.lost += len(batch) - off
			l.lostCause = err
		}
		l.mu.Unlock()
		if err == nil || closed {
			return
		}
		select {
		case <-time.After(l.opts.retryEvery):
		case <-l.closing:
		}
	}
}

// switchIfChanged moves to the file Reopen opened, or to a new file at the
// path when the open one has lost its last name (whatever is written to an
// unlinked file is gone for every reader, so an rm without SIGHUP would
// otherwise swallow events silently; a renamed file still has its name and
// keeps receiving events until Reopen, as log rotation expects). off is how
// much of batch the current file has taken; the result is how much of it
// counts as written once the switch is made.
func (l *Log) switchIfChanged(batch []byte, off int) (int, error) {
	next := l.takeNext()
	if next == nil {
		if !l.deleted() {
			return off, nil
		}
		f, err := openFile(l.path)
		if err != nil {
			return off, fmt.Errorf("the audit log %s was deleted and cannot be created again: %w", l.path, err)
		}
		l.opts.log.Warn().Str("audit_log", l.path).
			Msg("the audit log file was deleted while in use; created it again at its path (to rotate, rename the file and send SIGHUP)")
		next = f
	}
	return l.switchTo(next, batch, off), nil
}

// takeNext returns the file Reopen opened, if any, for the writer to
// switch to.
func (l *Log) takeNext() *os.File {
	l.mu.Lock()
	defer l.mu.Unlock()
	next := l.next
	l.next = nil
	return next
}

// deleted reports whether the open file has no name left.
func (l *Log) deleted() bool {
	if l.file == nil {
		return false
	}
	fi, err := l.file.Stat()
	if err != nil {
		return false // the write will tell what is wrong
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Nlink == 0
}

// switchTo makes f the destination and closes the previous file. When the
// previous file took only the head of an event (a write cut short), that
// event is finished there, or failing that cut off there and written whole
// to f; the result is the new offset into batch. The same file opened again
// (SIGHUP without a rename) just goes on where the write stopped.
func (l *Log) switchTo(f *os.File, batch []byte, off int) int {
	old := l.file
	lineStart := bytes.LastIndexByte(batch[:off], '\n') + 1
	head := batch[lineStart:off] // the current file's last, unfinished line
	same := false
	if old != nil {
		a, errA := old.Stat()
		b, errB := f.Stat()
		same = errA == nil && errB == nil && os.SameFile(a, b)
	}
	if len(head) > 0 && !same {
		off = l.settleHead(batch, lineStart, off)
	}
	if len(head) == 0 || !same {
		// A line left unfinished by someone else (a crash) is ended, so
		// that the first event is not glued onto it.
		if err := endLine(f, l.path); err != nil {
			l.opts.log.Error().Err(err).Str("audit_log", l.path).Msg("the audit log file ends with part of a line that cannot be ended; its last line will not parse")
		}
	}
	l.file, l.out = f, l.opts.wrap(f)
	if old != nil {
		_ = old.Close()
	}
	return off
}

// settleHead deals with the head of an event (batch[lineStart:off]) that the
// current file took before it is replaced: it finishes the event there when
// the file still has a name and takes the rest, and otherwise cuts the head
// off it, so that every file holds whole events only. It returns how much of
// batch counts as written.
func (l *Log) settleHead(batch []byte, lineStart, off int) int {
	lineEnd := off + bytes.IndexByte(batch[off:], '\n') + 1
	if !l.deleted() {
		n, werr := l.out.Write(batch[off:lineEnd])
		if werr == nil {
			return lineEnd
		}
		off += n
		if err := cutTail(l.file, int64(off-lineStart)); err != nil {
			l.opts.log.Error().Err(errors.Join(werr, err)).Str("audit_log", l.path).Int("fragment_bytes", off-lineStart).
				Msg("the previous audit log file ends with part of an event that could not be finished or cut off; its last line will not parse (audit-check counts it as a bad line); the whole event is in the new file")
		} else {
			l.opts.log.Warn().Err(werr).Str("audit_log", l.path).Int("fragment_bytes", off-lineStart).
				Msg("the previous audit log file could not take the rest of an event cut short; its head was cut off there and the whole event is written to the new file")
		}
	}
	return lineStart
}

// cutTail removes the last n bytes of f, the head of an event this Log
// wrote: the server is the file's only writer, so they are the file's end.
func cutTail(f *os.File, n int64) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() < n || !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file of at least %d bytes", f.Name(), n)
	}
	return f.Truncate(fi.Size() - n)
}

// reportLoop logs the destination's trouble from a goroutine of its own: the
// writer may be the one stuck, and the event loop must not write diagnostics.
//
// Every episode of trouble is told. Lines are at most one per
// ReportInterval, but a recovery after an error line is told at once, and
// what happened while lines were held back (an episode that began and ended
// inside the interval) is told by a line as soon as the interval is over,
// with its counts.
func (l *Log) reportLoop() {
	defer close(l.stopped)
	tick := time.NewTicker(l.opts.checkEvery)
	defer tick.Stop()
	var (
		lastLine time.Time // when the last line was logged
		alarmed  bool      // an error line was logged and no recovery since
		base     stats     // the counters when the last recovery or summary was logged
	)
	for {
		select {
		case <-l.notify:
		case <-tick.C:
		case <-l.stop:
			return
		}
		now := l.opts.now()
		problem := l.Health()
		st := l.stats()
		due := lastLine.IsZero() || now.Sub(lastLine) >= l.opts.reportEvery
		switch {
		case problem != nil && due:
			alarmed, lastLine = true, now
			l.opts.log.Error().Err(problem).Str("audit_log", l.name()).
				Uint64("dropped_events", st.dropped).Uint64("write_errors", st.writeErrors).Int("pending_bytes", st.pending).
				Uint64("episodes", st.episodes-base.episodes).
				Msgf("audit log failing: lock traffic continues, events wait in memory up to %d MiB and are then dropped; fix the destination (disk space, permissions, the reader of stdout); /readyz answers 503 until it works", l.opts.maxPending>>20)
		case problem == nil && (alarmed || (due && st.moved(base))):
			alarmed, lastLine = false, now
			ev := l.opts.log.Info()
			if st.dropped > base.dropped {
				ev = l.opts.log.Warn()
			}
			ev.Str("audit_log", l.name()).Uint64("dropped_events", st.dropped-base.dropped).Uint64("write_errors", st.writeErrors-base.writeErrors).
				Uint64("episodes", st.episodes-base.episodes).
				Msg("audit log writes succeed again; dropped_events is how many events the audit stream lost since the last such line, write_errors how many writes failed, episodes how many times trouble began")
			base = st
		}
	}
}

func (l *Log) name() string {
	if l.path == "" {
		return "stdout"
	}
	return l.path
}

type stats struct {
	dropped, writeErrors, episodes uint64
	pending                        int
}

// moved reports whether trouble happened since base.
func (s stats) moved(base stats) bool {
	return s.dropped != base.dropped || s.writeErrors != base.writeErrors || s.episodes != base.episodes
}

func (l *Log) stats() stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return stats{dropped: l.dropped, writeErrors: l.writeErrors, episodes: l.episodes, pending: len(l.pending) + l.inFlight}
}

// Health returns nil while events reach the destination, and otherwise why
// they do not: writes failing, a write stuck, events being dropped.
func (l *Log) Health() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var problems []error
	if l.failing != nil {
		problems = append(problems, fmt.Errorf("audit log writes failing: %w", l.failing))
	}
	if !l.writeSince.IsZero() {
		if d := time.Since(l.writeSince); d >= l.opts.blocked {
			problems = append(problems, fmt.Errorf("audit log write blocked for %s", d.Round(time.Second)))
		}
	}
	if l.dropping {
		problems = append(problems, fmt.Errorf("audit backlog over its limit of %d MiB: new events are dropped", l.opts.maxPending>>20))
	}
	return errors.Join(problems...)
}

// Err returns the last write error, or nil when the destination is healthy.
func (l *Log) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failing
}

// WriteErrors returns how many writes to the destination failed; a failed
// write is retried every 100 ms, so a lasting failure counts ten a second.
func (l *Log) WriteErrors() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.writeErrors
}

// DroppedEvents returns how many events were dropped over MaxPending.
func (l *Log) DroppedEvents() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dropped
}

// PendingBytes returns how many bytes of events wait for the destination.
func (l *Log) PendingBytes() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.pending) + l.inFlight
}

// Reopen opens the file again by its path, for log rotation: after a rename
// and Reopen, new events go to a new file at the original path. If the open
// fails, the old file stays in use. Reopen does not wait for a write in
// progress, so a stuck destination cannot hold up the caller (SIGHUP).
func (l *Log) Reopen() error {
	if l.path == "" {
		return nil
	}
	f, err := openFile(l.path)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		_ = f.Close()
		return errors.New("audit log is closed")
	}
	if l.next != nil {
		_ = l.next.Close()
	}
	l.next = f
	l.poke(l.wake)
	return nil
}

// Close writes every pending event and closes the destination. If the
// destination still fails, the events it did not take are lost, and Close
// says how many bytes.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.closing)
	l.mu.Unlock()
	close(l.wake)
	<-l.done
	close(l.stop)
	<-l.stopped

	l.mu.Lock()
	lost, cause := l.lost, l.lostCause
	next := l.next
	l.mu.Unlock()
	var errs []error
	if lost > 0 {
		errs = append(errs, fmt.Errorf("audit log %s: %d bytes of events not written: %w", l.name(), lost, cause))
	}
	if next != nil {
		_ = next.Close()
	}
	if l.file != nil {
		errs = append(errs, l.file.Close())
	}
	return errors.Join(errs...)
}
