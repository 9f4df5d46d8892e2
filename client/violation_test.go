package client

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/monolock/monolock/protocol"
)

// These tests use a scripted server for what a correct server never sends.

func TestUnknownFrameTypeIsViolation(t *testing.T) {
	addr, _ := fakeServer(t, func(conn net.Conn) {
		_, _ = conn.Write([]byte{0x7f})
		drain(conn)
	})
	_, err := New(Config{Address: addr}).Enqueue(testContext(t), "x", time.Second)
	if !errors.Is(err, ErrProtocolViolation) {
		t.Fatalf("err = %v, want ErrProtocolViolation", err)
	}
}

// heldThenLost acquires from a fake server and returns why the lock was lost.
func heldThenLost(t *testing.T, lease time.Duration, script func(net.Conn)) error {
	t.Helper()
	addr, _ := fakeServer(t, script)
	l, err := New(Config{Address: addr}).Acquire(testContext(t), "x", lease)
	if err != nil {
		// The loss came right behind the grant, before Acquire returned.
		return err
	}
	await(t, l.Lost(), "loss")
	if err := l.Close(); !errors.Is(err, l.Err()) {
		t.Errorf("Close = %v, want the loss cause %v", err, l.Err())
	}
	return l.Err()
}

func TestViolationsEndTheLock(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script func(net.Conn)
	}{
		{"token changes", func(conn net.Conn) {
			_, _ = conn.Write(acquired(5))
			readHeartbeat(conn)
			_, _ = conn.Write(acquired(6))
			drain(conn)
		}},
		{"WAITING after ACQUIRED", func(conn net.Conn) {
			_, _ = conn.Write(acquired(5))
			readHeartbeat(conn)
			_, _ = conn.Write(waiting())
			drain(conn)
		}},
		{"unsolicited ACQUIRED", func(conn net.Conn) {
			_, _ = conn.Write(append(acquired(5), acquired(5)...))
			drain(conn)
		}},
		{"unknown frame after ACQUIRED", func(conn net.Conn) {
			_, _ = conn.Write(append(acquired(5), 0x02))
			drain(conn)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := heldThenLost(t, time.Second, tc.script); !errors.Is(err, ErrProtocolViolation) {
				t.Fatalf("loss cause = %v, want ErrProtocolViolation", err)
			}
		})
	}
}

func readHeartbeat(conn net.Conn) {
	var b [1]byte
	_, _ = io.ReadFull(conn, b[:])
}

func TestEndOfStreamIsConnectionClosed(t *testing.T) {
	err := heldThenLost(t, time.Second, func(conn net.Conn) { _, _ = conn.Write(acquired(1)) })
	if !errors.Is(err, ErrConnectionClosed) {
		t.Fatalf("loss cause = %v, want ErrConnectionClosed", err)
	}
}

func TestNoReplyToAcquireTimesOut(t *testing.T) {
	addr, _ := fakeServer(t, drain)
	// When it gives up (0.8 × lease after the ACQUIRE's send) is the step
	// scripts' business (protocol/testdata/step/acquire-unanswered.txt).
	_, err := New(Config{Address: addr}).Enqueue(testContext(t), "x", 200*time.Millisecond)
	if !errors.Is(err, ErrHeartbeatTimeout) {
		t.Fatalf("err = %v, want ErrHeartbeatTimeout", err)
	}
}

func TestUnansweredHeartbeatWhileWaitingTimesOut(t *testing.T) {
	addr, _ := fakeServer(t, func(conn net.Conn) {
		_, _ = conn.Write(waiting())
		drain(conn)
	})
	l, err := New(Config{Address: addr}).Enqueue(testContext(t), "x", 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	await(t, l.Lost(), "loss while waiting")
	if err := l.Close(); !errors.Is(err, ErrHeartbeatTimeout) {
		t.Fatalf("Close = %v, want ErrHeartbeatTimeout", err)
	}
}

func TestServerErrorFrame(t *testing.T) {
	for _, code := range []protocol.Code{protocol.CodeShuttingDown, protocol.CodeNotAuthorized, 0x05, 0x42} {
		addr, _ := fakeServer(t, func(conn net.Conn) {
			_, _ = conn.Write(protocol.AppendError(nil, code, "because"))
		})
		_, err := New(Config{Address: addr}).Enqueue(testContext(t), "x", time.Second)
		var se *ServerError
		if !errors.As(err, &se) || se.Code != code || se.Reason != "because" {
			t.Fatalf("code 0x%02x: err = %#v", uint8(code), err)
		}
		if se.Retryable() != (code < 0x10) {
			t.Errorf("code 0x%02x: Retryable = %v", uint8(code), se.Retryable())
		}
	}
}

// TestFramesSplitByteByByte: the reader assembles frames from any segmentation.
func TestFramesSplitByteByByte(t *testing.T) {
	addr, _ := fakeServer(t, func(conn net.Conn) {
		trickle := func(frame []byte) {
			for _, b := range frame {
				if _, err := conn.Write([]byte{b}); err != nil {
					return
				}
			}
		}
		trickle(acquired(7))
		var b [1]byte
		for {
			if _, err := io.ReadFull(conn, b[:]); err != nil {
				return
			}
			trickle(acquired(7))
		}
	})
	c := New(Config{Address: addr})
	acks := watchAcks(c)
	l, err := c.Acquire(testContext(t), "x", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	nextAck(l.Context(), t, acks, true)
	nextAck(l.Context(), t, acks, true)
	if err := l.Close(); err != nil || l.Token() != 7 {
		t.Fatalf("Close = %v, token %d; want nil, 7", err, l.Token())
	}
}

// TestPromotionPushAccounting: the push answers no heartbeat, whichever side of
// the heartbeat's own reply it lands on, and several frames may share a segment.
func TestPromotionPushAccounting(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script func(net.Conn)
	}{
		{"WAITING and push in one segment", func(conn net.Conn) {
			_, _ = conn.Write(append(waiting(), acquired(9)...))
			answerHeartbeats(conn, acquired(9))
		}},
		{"push before the heartbeat's reply", func(conn net.Conn) {
			_, _ = conn.Write(waiting())
			readHeartbeat(conn)
			_, _ = conn.Write(append(acquired(9), acquired(9)...))
			answerHeartbeats(conn, acquired(9))
		}},
		{"push after the heartbeat's reply", func(conn net.Conn) {
			_, _ = conn.Write(waiting())
			readHeartbeat(conn)
			_, _ = conn.Write(append(waiting(), acquired(9)...))
			answerHeartbeats(conn, acquired(9))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, _ := fakeServer(t, tc.script)
			c := New(Config{Address: addr})
			acks := watchAcks(c)
			l, err := c.Acquire(testContext(t), "x", time.Second)
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				nextAck(l.Context(), t, acks, true)
			}
			if err := l.Close(); err != nil || l.Token() != 9 {
				t.Fatalf("Close = %v, token %d; want nil, 9", err, l.Token())
			}
		})
	}
}
