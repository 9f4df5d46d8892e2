// Package audit writes the audit stream: one JSON line per ownership change.
//
// The owner loop appends encoded lines to a memory buffer; a goroutine of the
// Log writes the buffer out at most every 10 ms, so an event costs the owner
// no syscall and no goroutine wake-up of its own. No event
// is ever dropped: if the disk falls more than MaxPending bytes behind, the
// owner waits for it (see Stalls), which bounds the memory a slow disk can
// take instead of losing events.
package audit

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// MaxPending is how far, in bytes, the stream may run ahead of the disk
// before the owner waits. At roughly 200 bytes a line it is some 40,000
// events.
const MaxPending = 8 << 20

// flushDelay is how long an event may wait in memory before it is written.
const flushDelay = 10 * time.Millisecond

// retryWrite is the pause before a failed write to the destination is tried
// again; the events stay buffered meanwhile.
const retryWrite = 100 * time.Millisecond

// Log is an audit destination: a file (reopened on Reopen) or stdout.
type Log struct {
	path string // "" for stdout

	mu      sync.Mutex
	drained *sync.Cond // signalled when pending shrinks
	pending []byte     // encoded lines not yet handed to the writer
	closed  bool
	stalls  uint64 // times an appender waited for the disk
	failing error  // the last write error, nil once writes succeed again

	wake chan struct{} // cap 1: there is something to write
	done chan struct{} // closed when the writer goroutine has exited

	fileMu sync.Mutex // held while writing or swapping the file
	out    io.Writer
	file   *os.File // nil for stdout
}

// Open starts an audit stream to dest: a file path (appended to, created
// 0640 if missing) or "-" for stdout.
func Open(dest string) (*Log, error) {
	l := &Log{wake: make(chan struct{}, 1), done: make(chan struct{})}
	l.drained = sync.NewCond(&l.mu)
	if dest == "-" {
		l.out = os.Stdout
	} else {
		f, err := openFile(dest)
		if err != nil {
			return nil, err
		}
		l.path, l.file, l.out = dest, f, f
	}
	go l.writeLoop()
	return l, nil
}

func openFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	return f, nil
}

// Write appends encoded lines. It never drops them: past MaxPending it waits
// for the writer.
func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	for len(l.pending) >= MaxPending && !l.closed {
		l.stalls++
		l.drained.Wait()
	}
	if l.closed {
		l.mu.Unlock()
		return 0, errors.New("audit log is closed")
	}
	first := len(l.pending) == 0
	l.pending = append(l.pending, p...)
	if first { // under mu, so that Close cannot close wake in between
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
	l.mu.Unlock()
	return len(p), nil
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
			closed := l.closed
			l.drained.Broadcast()
			l.mu.Unlock()
			if len(batch) == 0 {
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
// the log is closed; events are not dropped for a full disk.
func (l *Log) writeAll(batch []byte) {
	for {
		l.fileMu.Lock()
		n, err := l.out.Write(batch)
		l.fileMu.Unlock()
		batch = batch[n:]
		l.mu.Lock()
		l.failing = err
		closed := l.closed
		l.mu.Unlock()
		if err == nil || closed {
			return
		}
		time.Sleep(retryWrite)
	}
}

// Err returns the last write error, or nil when the destination is healthy.
func (l *Log) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failing
}

// Stalls returns how often an event had to wait for the disk.
func (l *Log) Stalls() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stalls
}

// Reopen opens the file again by its path, for log rotation: after a rename
// and Reopen, new events go to a new file at the original path. If the open
// fails, the old file stays in use.
func (l *Log) Reopen() error {
	if l.path == "" {
		return nil
	}
	f, err := openFile(l.path)
	if err != nil {
		return err
	}
	l.fileMu.Lock()
	old := l.file
	l.file, l.out = f, f
	l.fileMu.Unlock()
	return old.Close()
}

// Close writes every pending event and closes the destination.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.drained.Broadcast()
	l.mu.Unlock()
	close(l.wake)
	<-l.done
	if l.file != nil {
		return l.file.Close()
	}
	return nil
}
