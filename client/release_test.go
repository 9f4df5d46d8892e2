package client

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/monolock/monolock/internal/tcpstate"
	"github.com/monolock/monolock/protocol"
)

// portDialer dials for real and keeps each connection, for its ports.
type portDialer struct {
	mu    sync.Mutex
	conns []net.Conn
}

func (d *portDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err == nil {
		d.mu.Lock()
		d.conns = append(d.conns, c)
		d.mu.Unlock()
	}
	return c, err
}

func (d *portDialer) last(t *testing.T) net.Conn {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.conns) == 0 {
		t.Fatal("no connection was dialed")
	}
	return d.conns[len(d.conns)-1]
}

// clientTimeWait returns how many TIME_WAIT entries conn's connection left
// on the client's side, once it has finished closing.
func clientTimeWait(t *testing.T, conn net.Conn) int {
	t.Helper()
	n, err := tcpstate.ConnTimeWait(conn, patience)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Close against the real server: RELEASE, the server closes first and
// promotes the next waiter, and the client's port keeps no TIME_WAIT entry.
func TestCloseReleasesAndServerClosesFirst(t *testing.T) {
	addr := startServer(t)
	d := &portDialer{}
	c := New(Config{Address: addr, Dialer: d})
	ctx := testContext(t)
	l, err := c.Acquire(ctx, "release", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	conn := d.last(t)
	w, err := New(Config{Address: addr}).Enqueue(ctx, "release", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := l.Close(); err != nil {
		t.Fatalf("Close = %v, want nil", err)
	}
	await(t, w.Granted(), "the waiter's promotion")
	if n := clientTimeWait(t, conn); n != 0 {
		t.Errorf("after Close: %d TIME_WAIT entries on the client's port, want 0 (the server closes first)", n)
	}
	if !errors.Is(l.Err(), ErrReleased) {
		t.Errorf("Err after Close = %v, want ErrReleased", l.Err())
	}
}

// A server from before RELEASE answers ERROR 0x13 and closes: that is the
// release, not an error, and the client still closes second.
func TestCloseOldServerAnswersUnknownType(t *testing.T) {
	got := make(chan byte, 1)
	addr, _ := fakeServer(t, func(conn net.Conn) {
		_, _ = conn.Write(acquired(7))
		var b [1]byte
		if _, err := io.ReadFull(conn, b[:]); err != nil {
			return
		}
		got <- b[0]
		_, _ = conn.Write(protocol.AppendError(nil, protocol.CodeUnknownMessageType, "unknown message type: 0x03"))
	})
	d := &portDialer{}
	l, err := New(Config{Address: addr, Dialer: d}).Acquire(testContext(t), "old", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close = %v, want nil: ERROR 0x13 after RELEASE is the end of the session", err)
	}
	if b := await(t, got, "the byte after ACQUIRE"); b != byte(protocol.TypeRelease) {
		t.Fatalf("the client sent 0x%02x, want RELEASE", b)
	}
	if n := clientTimeWait(t, d.last(t)); n != 0 {
		t.Errorf("%d TIME_WAIT entries on the client's port, want 0", n)
	}
}

// A server that reads RELEASE and never closes: Close resets the connection
// once the release bound (here the lease, 300ms) has passed. The server sees
// an RST, not a FIN, and the client's port keeps no TIME_WAIT entry.
func TestCloseAbortsWhenTheServerNeverCloses(t *testing.T) {
	ended := make(chan error, 1)
	addr, _ := fakeServer(t, func(conn net.Conn) {
		_, _ = conn.Write(acquired(7))
		var b [1]byte
		_, err := io.ReadFull(conn, b[:])
		for err == nil {
			_, err = io.ReadFull(conn, b[:])
		}
		ended <- err
	})
	d := &portDialer{}
	l, err := New(Config{Address: addr, Dialer: d}).Acquire(testContext(t), "stuck", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close = %v, want nil", err)
	}
	if err := await(t, ended, "the fake server's read to end"); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("the server's read ended with %v, want ECONNRESET: an abortive close", err)
	}
	if n := clientTimeWait(t, d.last(t)); n != 0 {
		t.Errorf("%d TIME_WAIT entries on the client's port, want 0", n)
	}
}
