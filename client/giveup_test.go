package client

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/monolock/monolock/protocol"
)

// Tests of the give-up rule (rule 7): after giving up on its own the client
// stops the work at once, but closes the connection only when the work has
// stopped or the lease has run out since its last write, so that the server's
// expiry, not the close, hands the lock on.

// recordingDialer dials for real and records, on its one connection, when each
// write started and when the connection was closed.
type recordingDialer struct {
	mu     sync.Mutex
	writes []time.Time
	closed time.Time
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

// lastWrite is when the newest write started, and how many writes started
// after since.
func (d *recordingDialer) lastWrite(since time.Time) (last time.Time, after int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, w := range d.writes {
		if w.After(since) {
			after++
		}
	}
	return d.writes[len(d.writes)-1], after
}

func (d *recordingDialer) closedAt() time.Time {
	<-d.closes
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed
}

type recordingConn struct {
	net.Conn
	d    *recordingDialer
	once sync.Once
}

func (c *recordingConn) Write(b []byte) (int, error) {
	c.d.mu.Lock()
	c.d.writes = append(c.d.writes, time.Now())
	c.d.mu.Unlock()
	return c.Conn.Write(b)
}

func (c *recordingConn) Close() error {
	c.once.Do(func() {
		c.d.mu.Lock()
		c.d.closed = time.Now()
		c.d.mu.Unlock()
		close(c.d.closes)
	})
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
// the connection is closed only once the lease has passed since the last
// write, and nothing is written after the give-up.
func TestGiveUpKeepsConnectionWhileWorkRuns(t *testing.T) {
	const lease = 300 * time.Millisecond
	addr, _ := fakeServer(t, answerOnceThenSilence)
	d := newRecordingDialer()
	var gaveUp, closed time.Time
	err := New(Config{Address: addr, Dialer: d}).Do(testContext(t), "x", lease, func(ctx context.Context, _ uint64) error {
		if !LockFromContext(ctx).Valid() {
			t.Error("Valid is false at the start of the work")
		}
		<-ctx.Done()
		gaveUp = time.Now()
		if LockFromContext(ctx).Valid() {
			t.Error("Valid is true after the work's context ended")
		}
		// Work that does not stop: the close must wait for the lease.
		closed = d.closedAt()
		return nil
	})
	if !errors.Is(err, ErrHeartbeatTimeout) {
		t.Fatalf("Do = %v, want ErrHeartbeatTimeout", err)
	}
	last, after := d.lastWrite(gaveUp)
	if after != 0 {
		t.Errorf("%d writes after the give-up", after)
	}
	if closed.Sub(last) < lease {
		t.Fatalf("closed %v after the last write started, before the lease (%v) ran out", closed.Sub(last), lease)
	}
	if closed.Before(gaveUp) {
		t.Fatalf("closed before the work was told to stop")
	}
}

// TestGiveUpClosesWhenWorkStops: a protocol violation while holding a lock
// with a long lease; the work stops when told, and the connection is closed
// right after it returned, not at the end of the lease.
func TestGiveUpClosesWhenWorkStops(t *testing.T) {
	addr, _ := fakeServer(t, func(conn net.Conn) {
		// An answer with no request in flight: a violation.
		_, _ = conn.Write(append(acquired(3), acquired(3)...))
		drain(conn)
	})
	d := newRecordingDialer()
	var returned time.Time
	done := make(chan error, 1)
	go func() {
		done <- New(Config{Address: addr, Dialer: d}).Do(testContext(t), "x", time.Minute, func(ctx context.Context, _ uint64) error {
			<-ctx.Done()
			returned = time.Now()
			return nil
		})
	}()
	// Within patience, far less than the minute-long lease.
	if err := await(t, done, "Do after the violation"); !errors.Is(err, ErrProtocolViolation) {
		t.Fatalf("Do = %v, want ErrProtocolViolation", err)
	}
	if closed := d.closedAt(); closed.Before(returned) {
		t.Fatalf("closed %v before the work returned", returned.Sub(closed))
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
	closing := time.Now()
	if err := l.Close(); !errors.Is(err, ErrProtocolViolation) {
		t.Fatalf("Close = %v, want ErrProtocolViolation", err)
	}
	if closed := d.closedAt(); closed.Before(closing) {
		t.Fatalf("closed %v before Close was called", closing.Sub(closed))
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
			sawClose := make(chan struct{})
			addr, _ := fakeServer(t, func(conn net.Conn) {
				_, _ = conn.Write(acquired(3))
				if tc.end != nil {
					_, _ = conn.Write(tc.end)
				} else {
					_ = conn.(*net.TCPConn).CloseWrite()
				}
				_, _ = io.Copy(io.Discard, conn)
				close(sawClose)
			})
			l, err := New(Config{Address: addr}).Acquire(testContext(t), "x", time.Minute)
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
