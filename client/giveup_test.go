package client

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/monolock/monolock/protocol"
)

// Tests of the give-up rule (rule 7): after giving up on its own the client
// stops the work at once, but closes the connection only when the work has
// stopped or the lease has run out since its last write, so that the server's
// expiry, not the close, hands the lock on.

// recordingDialer dials for real and records, on its one connection, how many
// writes started and whether the connection was closed.
type recordingDialer struct {
	writes atomic.Int32
	closes chan struct{} // closed at the first Close
}

func newRecordingDialer() *recordingDialer { return &recordingDialer{closes: make(chan struct{})} }

func (d *recordingDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &recordingConn{Conn: conn, d: d}, nil
}

// closed reports whether the connection has been closed, without waiting.
func (d *recordingDialer) closed() bool {
	select {
	case <-d.closes:
		return true
	default:
		return false
	}
}

type recordingConn struct {
	net.Conn
	d    *recordingDialer
	once sync.Once
}

func (c *recordingConn) Write(b []byte) (int, error) {
	c.d.writes.Add(1)
	return c.Conn.Write(b)
}

func (c *recordingConn) Close() error {
	c.once.Do(func() { close(c.d.closes) })
	return c.Conn.Close()
}

// answerOnceThenSilence grants, answers the first heartbeat, then reads
// without answering until the client closes.
func answerOnceThenSilence(conn net.Conn) {
	_, _ = conn.Write(acquired(3))
	readHeartbeat(conn)
	_, _ = conn.Write(acquired(3))
	drain(conn)
}

// TestGiveUpKeepsConnectionWhileWorkRuns: the work does not stop when told;
// the session closes the connection on its own (at the lease after the last
// write: the step scripts in protocol/testdata/step test when), and nothing is written
// after the give-up.
func TestGiveUpKeepsConnectionWhileWorkRuns(t *testing.T) {
	const lease = 300 * time.Millisecond
	addr, _ := fakeServer(t, answerOnceThenSilence)
	d := newRecordingDialer()
	var atGiveUp, atClose int32
	err := New(Config{Address: addr, Dialer: d}).Do(testContext(t), "x", lease, func(ctx context.Context, _ uint64) error {
		if !LockFromContext(ctx).Valid() {
			t.Error("Valid is false at the start of the work")
		}
		<-ctx.Done()
		atGiveUp = d.writes.Load()
		if LockFromContext(ctx).Valid() {
			t.Error("Valid is true after the work's context ended")
		}
		// Work that does not stop: the session must close by itself.
		await(t, d.closes, "the close at the end of the lease")
		atClose = d.writes.Load()
		return nil
	})
	if !errors.Is(err, ErrHeartbeatTimeout) {
		t.Fatalf("Do = %v, want ErrHeartbeatTimeout", err)
	}
	if atClose != atGiveUp {
		t.Errorf("%d writes after the give-up", atClose-atGiveUp)
	}
}

// TestGiveUpClosesWhenWorkStops: a protocol violation while holding a lock
// with a long lease; the work stops when told, and the connection is closed
// once it has returned, not at the end of the lease.
func TestGiveUpClosesWhenWorkStops(t *testing.T) {
	addr, _ := fakeServer(t, func(conn net.Conn) {
		// An answer with no request in flight: a violation.
		_, _ = conn.Write(append(acquired(3), acquired(3)...))
		drain(conn)
	})
	d := newRecordingDialer()
	done := make(chan error, 1)
	go func() {
		done <- New(Config{Address: addr, Dialer: d}).Do(testContext(t), "x", time.Minute, func(ctx context.Context, _ uint64) error {
			<-ctx.Done()
			if d.closed() {
				t.Error("closed before the work returned")
			}
			return nil
		})
	}()
	// Within patience, far less than the minute-long lease.
	if err := await(t, done, "Do after the violation"); !errors.Is(err, ErrProtocolViolation) {
		t.Fatalf("Do = %v, want ErrProtocolViolation", err)
	}
	if !d.closed() {
		t.Fatal("Do returned with the connection open")
	}
}

// TestGiveUpLockHandleWaitsForClose: with a Lock handle, the connection stays
// open after the loss until the caller's Close.
func TestGiveUpLockHandleWaitsForClose(t *testing.T) {
	addr, _ := fakeServer(t, func(conn net.Conn) {
		_, _ = conn.Write(append(acquired(3), 0x7f)) // an unknown frame type
		drain(conn)
	})
	d := newRecordingDialer()
	l, err := New(Config{Address: addr, Dialer: d}).Acquire(testContext(t), "x", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	await(t, l.Lost(), "loss")
	if d.closed() {
		t.Fatal("closed before Close was called")
	}
	if err := l.Close(); !errors.Is(err, ErrProtocolViolation) {
		t.Fatalf("Close = %v, want ErrProtocolViolation", err)
	}
	if !d.closed() {
		t.Fatal("Close returned with the connection open")
	}
}

// TestServerEndClosesAtOnce: after an ERROR or end of stream the server has
// let go already; the client closes without waiting for Close or the lease.
func TestServerEndClosesAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		end   []byte
		cause error
	}{
		{"ERROR", protocol.AppendError(nil, protocol.CodeClosedByAdmin, "released"), protocol.ErrClosedByAdmin},
		{"end of stream", nil, ErrConnectionClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sawClose, held := make(chan struct{}), make(chan struct{})
			addr, _ := fakeServer(t, func(conn net.Conn) {
				_, _ = conn.Write(acquired(3))
				<-held // the grant first, the end afterwards
				if tc.end != nil {
					_, _ = conn.Write(tc.end)
				} else {
					_ = conn.(*net.TCPConn).CloseWrite()
				}
				_, _ = io.Copy(io.Discard, conn)
				close(sawClose)
			})
			l, err := New(Config{Address: addr}).Acquire(testContext(t), "x", time.Minute)
			close(held)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			await(t, sawClose, "the client's close, without Close")
			if !errors.Is(l.Err(), tc.cause) {
				t.Fatalf("Err = %v, want %v", l.Err(), tc.cause)
			}
		})
	}
}

// TestValidSeesTheDeadlineWithoutTheSession: while the session goroutine is
// stuck (here in the test's observer), Valid still turns false at the
// deadline, by the clock alone; once it has, a late answer does not revive
// the lock.
func TestValidSeesTheDeadlineWithoutTheSession(t *testing.T) {
	const lease = 200 * time.Millisecond
	addr, _ := fakeServer(t, func(conn net.Conn) {
		_, _ = conn.Write(acquired(3))
		answerHeartbeats(conn, acquired(3))
	})
	c := New(Config{Address: addr})
	stuck, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	c.observe = func(e ackEvent) {
		if e.Heartbeat {
			once.Do(func() { close(stuck); <-release })
		}
	}
	l, err := c.Acquire(testContext(t), "x", lease)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if !l.Valid() {
		t.Fatal("Valid is false right after the grant")
	}
	await(t, stuck, "the first heartbeat's answer")
	for giveUp := time.After(patience); l.Valid(); {
		select {
		case <-giveUp:
			t.Fatalf("Valid still true %v after the session stalled", patience)
		case <-time.After(time.Millisecond):
		}
	}
	if l.Err() != nil {
		t.Fatalf("the stalled session ended the lock: %v", l.Err())
	}
	close(release)
	await(t, l.Lost(), "loss after the session resumes")
	if !errors.Is(l.Err(), ErrHeartbeatTimeout) || l.Valid() {
		t.Fatalf("Err = %v, Valid %v; want ErrHeartbeatTimeout, false", l.Err(), l.Valid())
	}
}

func TestValidOutsideTheHold(t *testing.T) {
	addr := startServer(t)
	ctx := testContext(t)
	if LockFromContext(ctx) != nil || LockFromContext(ctx).Valid() {
		t.Fatal("a context without a lock has a valid Lock")
	}
	holder, err := New(Config{Address: addr}).Acquire(ctx, "valid", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	waiter, err := New(Config{Address: addr}).Enqueue(ctx, "valid", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close()
	if !holder.Valid() || waiter.Valid() {
		t.Fatalf("holder Valid %v, waiter Valid %v; want true, false", holder.Valid(), waiter.Valid())
	}
	until := holder.ValidUntil()
	if until.IsZero() || !waiter.ValidUntil().IsZero() {
		t.Fatalf("ValidUntil: holder %v, waiter %v", until, waiter.ValidUntil())
	}
	if err := holder.Close(); err != nil {
		t.Fatal(err)
	}
	if holder.Valid() {
		t.Fatal("Valid after Close")
	}
	await(t, waiter.Granted(), "promotion")
	if !waiter.Valid() {
		t.Fatal("the promoted waiter is not Valid")
	}
}
