package conffile

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// safety bounds a wait for a call that must return at once; it only keeps a
// broken build from hanging the test run.
const safety = 30 * time.Second

func TestReadRegularFileUpToItsCap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	want := bytes.Repeat([]byte("x"), 100)
	if err := os.WriteFile(path, want, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path, 100)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Read at the cap: %d bytes, %v; want 100 bytes", len(got), err)
	}
	if _, err := Read(path, 99); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Read one byte over the cap: %v, want ErrTooLarge", err)
	}
}

// TestHugeFileIsRefusedUnread: a 256 MiB file (sparse, so the test costs no
// disk) is refused by its size; the error says what to do.
func TestHugeFileIsRefusedUnread(t *testing.T) {
	path := filepath.Join(t.TempDir(), "huge")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(256 << 20); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	_, err = Read(path, 1<<20)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Read of 256 MiB with a 1 MiB cap: %v, want ErrTooLarge", err)
	}
	t.Log(err)
}

// TestNonRegularIsRefusedWithoutBlocking: a FIFO nobody writes to would
// block a plain open for ever; it is refused at once, as is a directory and
// a device.
func TestNonRegularIsRefusedWithoutBlocking(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{fifo, t.TempDir(), "/dev/null"} {
		done := make(chan error, 1)
		go func() {
			_, err := Read(path, 1<<20)
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, ErrNotRegular) {
				t.Errorf("%s: %v, want ErrNotRegular", path, err)
			}
			t.Log(err)
		case <-time.After(safety):
			// Unblock the open so that the goroutine ends with the test.
			if w, err := os.OpenFile(fifo, os.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
				_ = w.Close()
			}
			t.Fatalf("%s: Read blocked", path)
		}
	}
}
