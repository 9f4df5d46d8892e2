// Package conffile reads the files the server loads at start and rereads on
// SIGHUP (certificates, keys, ACLs, session-ticket keys) so that no such file
// can hang the caller or fill its memory: the path must name a regular file
// (a FIFO, a device or a directory is refused before it is opened for
// reading), no larger than the cap its caller gives, and the open never
// waits for a writer (O_NONBLOCK), so a FIFO put at the path cannot block it.
//
// A hung mount can still block the stat or the open; that is why the server
// runs its reloads on a goroutine of their own, away from the signals that
// stop it.
package conffile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular is the cause of a refusal of a path that does not name a
// regular file.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is the cause of a refusal of a file over its cap.
var ErrTooLarge = errors.New("file too large")

// Open opens path for reading once a stat says it is a regular file, without
// waiting for a writer, and checks again on the opened descriptor (the path
// may have changed in between). The caller closes the file.
func Open(path string) (*os.File, fs.FileInfo, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	if err := regular(path, st); err != nil {
		return nil, nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	if st, err = f.Stat(); err == nil {
		err = regular(path, st)
	}
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	return f, st, nil
}

// Read returns the content of the regular file at path, refusing it when it
// holds more than limit bytes: before reading when its size says so, and
// after limit+1 bytes when it grew while read.
func Read(path string, limit int64) ([]byte, error) {
	f, st, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st.Size() > limit {
		return nil, tooLarge(path, st.Size(), limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	if int64(len(data)) > limit {
		return nil, tooLarge(path, int64(len(data)), limit)
	}
	return data, nil
}

func regular(path string, st fs.FileInfo) error {
	if st.Mode().IsRegular() {
		return nil
	}
	return &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w (%s): name a regular file; a FIFO, a device or a directory is never read", ErrNotRegular, kind(st.Mode()))}
}

func tooLarge(path string, size, limit int64) error {
	return &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: %d bytes, over the cap of %d bytes for this kind of file; check that the path names the right file", ErrTooLarge, size, limit)}
}

// kind names a file type the way ls -l would describe it.
func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeDir != 0:
		return "a directory"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "mode " + m.String()
}
