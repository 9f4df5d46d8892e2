package eventloop_test

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/monolock/monolock/internal/testsupport/wire"
	"github.com/monolock/monolock/protocol"
	"github.com/monolock/monolock/protocol/admin"
)

// Conformance cases 4, 5 and 6 of protocol.md: errors, early answers, and the
// byte stream.

// Case 4: every error code 0x10–0x17 from its exact trigger, each followed by
// the server closing the connection; and the order in which ACQUIRE's fields
// are validated.
func TestConformance4ErrorCodes(t *testing.T) {
	ts := startServer(t, 0)
	// busy is held for the whole test, so a session can be made WAITING.
	const busy = "case-4-busy"
	holder(t, ts, busy, longLease)

	type state int
	const (
		fresh   state = iota // nothing sent yet
		holding              // sent a valid ACQUIRE, got ACQUIRED
		waiting              // sent a valid ACQUIRE, got WAITING
	)
	cases := []struct {
		name   string
		before state
		send   []byte
		code   protocol.Code
		reason string // the reason must contain this
	}{
		{"version 2", fresh, wire.RawAcquire(2, 1000, 1, []byte("x")), protocol.CodeUnsupportedVersion, ""},
		{"version 0", fresh, wire.RawAcquire(0, 1000, 1, []byte("x")), protocol.CodeUnsupportedVersion, ""},
		{"version 255", fresh, wire.RawAcquire(255, 1000, 1, []byte("x")), protocol.CodeUnsupportedVersion, ""},

		{"HEARTBEAT first", fresh, wire.Heartbeat, protocol.CodeFirstMessageNotAcquire, ""},
		{"HEARTBEATs first", fresh, bytes.Repeat(wire.Heartbeat, 3), protocol.CodeFirstMessageNotAcquire, ""},
		{"RELEASE first", fresh, wire.Release, protocol.CodeFirstMessageNotAcquire, ""},

		{"second ACQUIRE while holding, same lock", holding, nil, protocol.CodeDuplicateAcquire, ""},
		{"second ACQUIRE while holding, other lock", holding, wire.Acquire("case-4-other", 1000), protocol.CodeDuplicateAcquire, ""},
		{"second ACQUIRE while waiting, same lock", waiting, wire.Acquire(busy, 1000), protocol.CodeDuplicateAcquire, ""},
		{"second ACQUIRE while waiting, other lock", waiting, wire.Acquire("case-4-other", 1000), protocol.CodeDuplicateAcquire, ""},

		{"name_len 0", fresh, wire.RawAcquire(1, 1000, 0, nil), protocol.CodeEmptyName, ""},
		{"name_len 256", fresh, wire.RawAcquire(1, 1000, 256, bytes.Repeat([]byte("n"), 256)), protocol.CodeNameTooLong, ""},
		{"name_len 300", fresh, wire.RawAcquire(1, 1000, 300, bytes.Repeat([]byte("n"), 300)), protocol.CodeNameTooLong, ""},
		{"name_len 65535", fresh, wire.RawAcquire(1, 1000, 65535, nil), protocol.CodeNameTooLong, ""},
		{"name 0xff", fresh, wire.RawAcquire(1, 1000, 1, []byte{0xff}), protocol.CodeInvalidUTF8, ""},
		{"name with a cut rune", fresh, wire.RawAcquire(1, 1000, 2, []byte("a\xc3")), protocol.CodeInvalidUTF8, ""},
		{"name with a surrogate", fresh, wire.RawAcquire(1, 1000, 3, []byte("\xed\xa0\x80")), protocol.CodeInvalidUTF8, ""},
		{"name overlong encoding", fresh, wire.RawAcquire(1, 1000, 2, []byte("\xc0\xaf")), protocol.CodeInvalidUTF8, ""},
		{"lease 0", fresh, wire.RawAcquire(1, 0, 1, []byte("x")), protocol.CodeInvalidLease, ""},

		// Validation order: the first failing field, in field order, is reported.
		{"order: version 2 and lease 0", fresh, wire.RawAcquire(2, 0, 1, []byte("x")), protocol.CodeUnsupportedVersion, ""},
		{"order: version 2, lease 0, name_len 0", fresh, wire.RawAcquire(2, 0, 0, nil), protocol.CodeUnsupportedVersion, ""},
		{"order: lease 0 and name_len 0", fresh, wire.RawAcquire(1, 0, 0, nil), protocol.CodeInvalidLease, ""},
		{"order: lease 0 and name_len 300", fresh, wire.RawAcquire(1, 0, 300, bytes.Repeat([]byte("n"), 300)), protocol.CodeInvalidLease, ""},
		{"order: lease 0 and invalid UTF-8", fresh, wire.RawAcquire(1, 0, 1, []byte{0xff}), protocol.CodeInvalidLease, ""},
		{"order: name_len 0 with garbage after it", fresh, wire.RawAcquire(1, 1000, 0, []byte{0xff, 0xfe, 0x7f, 0x00}), protocol.CodeEmptyName, ""},
		{"order: name_len 300 of invalid UTF-8", fresh, wire.RawAcquire(1, 1000, 300, bytes.Repeat([]byte{0xff}, 300)), protocol.CodeNameTooLong, ""},
	}
	// 0x13 for a first byte that is not a client frame (0x01, 0x02, 0x03), at any point.
	for _, b := range []byte{0x00, 0x04, 0x11, 0x12, 0x13, 0x7f, 0x80, 0xff} {
		cases = append(cases, struct {
			name   string
			before state
			send   []byte
			code   protocol.Code
			reason string
		}{fmt.Sprintf("type 0x%02x first", b), fresh, []byte{b}, protocol.CodeUnknownMessageType, fmt.Sprintf("unknown message type: 0x%02x", b)})
	}
	cases = append(cases, []struct {
		name   string
		before state
		send   []byte
		code   protocol.Code
		reason string
	}{
		{"type 0x7f after ACQUIRE", holding, []byte{0x7f}, protocol.CodeUnknownMessageType, "unknown message type: 0x7f"},
		{"type 0x7f while waiting", waiting, []byte{0x7f}, protocol.CodeUnknownMessageType, "unknown message type: 0x7f"},
		{"type 0x7f with trailing bytes", fresh, []byte{0x7f, 0x01, 0x01}, protocol.CodeUnknownMessageType, "unknown message type: 0x7f"},
		{"type 0x00 after heartbeats", holding, []byte{0x02, 0x02, 0x00}, protocol.CodeUnknownMessageType, "unknown message type: 0x00"},
	}...)

	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, ts, tc.name)
			var tok uint64
			switch tc.before {
			case holding:
				lock := fmt.Sprintf("case-4-%d", i)
				c.SendAcquire(lock, longLease)
				tok = c.ExpectAcquired()
				if tc.send == nil {
					tc.send = wire.Acquire(lock, longLease)
				}
			case waiting:
				c.SendAcquire(busy, longLease)
				c.ExpectWaiting()
			}
			c.Send(tc.send)
			// Frames before the bad one are answered (heartbeats of a holder).
			for _, b := range tc.send {
				if b != byte(protocol.TypeHeartbeat) || tc.before != holding {
					break
				}
				c.ExpectToken(tok)
			}
			reason := c.ExpectErrorThenEOF(tc.code)
			if !strings.Contains(reason, tc.reason) {
				t.Errorf("reason %q does not contain %q", reason, tc.reason)
			}
			t.Logf("ERROR 0x%02x %q", uint8(tc.code), reason)
		})
	}
	// Only the busy lock's holder is left: every failed session was closed,
	// and the holding ones released their locks.
	ts.waitStats(t, admin.Stats{Sessions: 1, Locks: 1, Waiters: 0, Timers: 1})
}

// Case 5: a field is judged as soon as it has arrived. The client sends a
// prefix of a frame and nothing more, and waits for the ERROR.
func TestConformance5EarlyAnswers(t *testing.T) {
	ts := startServer(t, 0)
	header300 := wire.RawAcquire(1, 1000, 300, nil)
	if len(header300) != protocol.AcquireHeaderLen {
		t.Fatalf("header is %d bytes", len(header300))
	}
	for _, tc := range []struct {
		name string
		send []byte
		code protocol.Code
	}{
		{"version 2 after two bytes", []byte{0x01, 0x02}, protocol.CodeUnsupportedVersion},
		{"version 0 after two bytes", []byte{0x01, 0x00}, protocol.CodeUnsupportedVersion},
		{"name_len 300 after the header alone", header300, protocol.CodeNameTooLong},
		{"name_len 0 after the header alone", wire.RawAcquire(1, 1000, 0, nil), protocol.CodeEmptyName},
		{"lease 0 after six bytes", wire.RawAcquire(1, 0, 0, nil)[:6], protocol.CodeInvalidLease},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, ts, tc.name)
			c.Send(tc.send)
			c.ExpectErrorThenEOF(tc.code) // nothing else was ever sent
		})
	}
	// The same, split byte by byte: each prefix alone must not be judged.
	t.Run("name_len 300, header byte by byte", func(t *testing.T) {
		c := dial(t, ts, "bytewise header")
		c.SendBytewise(header300, time.Millisecond)
		c.ExpectErrorThenEOF(protocol.CodeNameTooLong)
	})
	ts.waitStats(t, admin.Stats{})
}

// Case 6: TCP is a stream. Frames split at every byte are put together, and
// several frames in one segment are all answered, in order.
func TestConformance6Stream(t *testing.T) {
	ts := startServer(t, 0)

	t.Run("ACQUIRE byte by byte", func(t *testing.T) {
		c := dial(t, ts, "bytewise")
		c.SendBytewise(wire.Acquire("case-6-bytewise/ロック", longLease), time.Millisecond)
		tok := c.ExpectAcquired()
		// Heartbeats one per write; and no stray frame came before them.
		for range 3 {
			c.SendHeartbeat()
			c.ExpectToken(tok)
		}
		// A waiter, byte by byte, then promoted.
		w := dial(t, ts, "bytewise waiter")
		w.SendBytewise(wire.Acquire("case-6-bytewise/ロック", longLease), time.Millisecond)
		w.ExpectWaiting()
		c.Close()
		if t2 := w.ExpectAcquired(); t2 <= tok {
			t.Fatalf("token %d after %d", t2, tok)
		}
	})

	t.Run("ACQUIRE and three HEARTBEATs in one write", func(t *testing.T) {
		c := dial(t, ts, "coalesced")
		c.Send(append(wire.Acquire("case-6-coalesced", longLease), 0x02, 0x02, 0x02))
		tok := c.ExpectAcquired()
		for range 3 {
			c.ExpectToken(tok)
		}
		// The same for a waiter: four WAITING.
		w := dial(t, ts, "coalesced waiter")
		w.Send(append(wire.Acquire("case-6-coalesced", longLease), 0x02, 0x02, 0x02))
		for range 4 {
			w.ExpectWaiting()
		}
		// Nothing more is pending on either: the next frame answers the next heartbeat.
		c.SendHeartbeat()
		c.ExpectToken(tok)
		w.SendHeartbeat()
		w.ExpectWaiting()
	})

	t.Run("frames cut across writes", func(t *testing.T) {
		const heartbeats = 100
		stream := append(wire.Acquire("case-6-cut", longLease), bytes.Repeat(wire.Heartbeat, heartbeats)...)
		c := dial(t, ts, "cut")
		// Writes of 3 and 5 bytes alternate: every frame boundary falls
		// somewhere else in a write.
		for i, step := 0, 3; i < len(stream); i, step = i+step, 8-step {
			c.Send(stream[i:min(i+step, len(stream))])
			time.Sleep(100 * time.Microsecond)
		}
		tok := c.ExpectAcquired()
		for range heartbeats {
			c.ExpectToken(tok)
		}
	})

	t.Run("error in the middle of a write", func(t *testing.T) {
		c := dial(t, ts, "error mid-write")
		// The frames before the bad byte are answered, the ERROR follows, and
		// the heartbeat after it is never answered.
		c.Send(append(wire.Acquire("case-6-error", longLease), 0x02, 0x7f, 0x02))
		tok := c.ExpectAcquired()
		c.ExpectToken(tok)
		c.ExpectErrorThenEOF(protocol.CodeUnknownMessageType)
	})

	// Each subtest closed its connections when it ended.
	ts.waitStats(t, admin.Stats{})
}

// TestPipelinedBurstIsServed: protocol.md says a client that sends
// heartbeats without waiting for the replies is not punished, and server.md
// closes a peer for output only when it does not drain it for io-timeout.
// This client sends a burst of 100,000 heartbeats in one write and then
// reads every answer.
func TestPipelinedBurstIsServed(t *testing.T) {
	ts := startServer(t, time.Second)
	c, tok := holder(t, ts, "burst", longLease)
	const burst = 100_000
	c.Send(bytes.Repeat(wire.Heartbeat, burst))
	r := bufio.NewReader(c.NC)
	_ = c.NC.SetReadDeadline(time.Now().Add(safety))
	var buf protocol.FrameBuffer
	for i := range burst {
		var f protocol.Frame
		if err := protocol.ReadServerFrame(r, &buf, &f); err != nil {
			t.Fatalf("answer %d of %d: %v", i+1, burst, err)
		}
		if f.Type != protocol.TypeAcquired || f.Token != tok {
			t.Fatalf("answer %d: type 0x%02x token %d, want ACQUIRED(%d)", i+1, uint8(f.Type), f.Token, tok)
		}
	}
	c.SendHeartbeat()
	c.ExpectToken(tok)
}
