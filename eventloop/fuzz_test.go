package eventloop

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/monolock/monolock/internal/testsupport/wire"
	"github.com/monolock/monolock/protocol"
)

// FuzzServer feeds the loop arbitrary byte streams and checks what comes
// back against the protocol's rules: the answers are a clean sequence of
// server frames, at most one ERROR and only as the last frame, always a
// client-error code and always the code of the input's first violation,
// which is always answered; a valid ACQUIRE is answered WAITING or
// ACQUIRED, a session keeps one token and never goes back from ACQUIRED to
// WAITING. After every input a fresh client must still be served and, once
// every connection is closed, the loop must hold nothing (no session, lock,
// waiter or timer).
//
// It drives the real handler in-process, over the rig's fake connections
// (thousands of inputs a second); the wire tests and TestAdversarialClients
// send such bytes over real sockets.
//
// Arguments: the bytes, a split point (two segments, two turns, when it
// falls inside the input) and whether the client half-closes after them
// (gnet then closes the connection once it has handed over what it read;
// otherwise the client closes once the server has answered everything).
//
// Seeds are in testdata/fuzz/FuzzServer. Long runs:
//
//	go test -run '^$' -fuzz '^FuzzServer$' -fuzztime 5m ./eventloop/
func FuzzServer(f *testing.F) {
	// One loop per fuzzing process, shared by every input it runs, so that
	// what one input leaves behind is seen by the next.
	var mu sync.Mutex
	r := newRig(f, Config{})
	f.Add(protocol.AppendAcquire(protocol.AppendAcquire(nil, 1000, string(bytes.Repeat([]byte("n"), protocol.MaxNameLen))), 1000, "x"), uint16(263), true)
	f.Add(append(protocol.AppendAcquire(nil, 1, "short-lease"), bytes.Repeat(wire.Heartbeat, 2000)...), uint16(0), false)

	var inputs uint64
	f.Fuzz(func(t *testing.T, data []byte, split uint16, halfClose bool) {
		mu.Lock()
		defer mu.Unlock()
		r.t = t
		inputs++
		if len(data) > fuzzMaxInput {
			data = data[:fuzzMaxInput]
		}
		ex := fuzzExchange(r, data, int(split), halfClose)
		fuzzCheck(t, data, ex)
		fuzzHealth(t, r, inputs)
	})
}

// fuzzMaxInput keeps one input's work small; 64 KiB of heartbeats still
// make half a megabyte of answers.
const fuzzMaxInput = 64 << 10

type fuzzResult struct {
	replies   []byte
	closed    bool // the server closed the connection (else the client did, once answered)
	split     bool // the input went out in two segments
	halfClose bool
}

// fuzzExchange delivers data (in two segments when split falls inside it),
// serves every turn the session asks for, as gnet would, then half-closes
// or closes.
func fuzzExchange(r *rig, data []byte, split int, halfClose bool) fuzzResult {
	c := r.connect()
	parts := [][]byte{data}
	if split > 0 && split < len(data) {
		parts = [][]byte{data[:split], data[split:]}
	}
	res := fuzzResult{split: len(parts) > 1, halfClose: halfClose}
	for _, p := range parts {
		if c.closed {
			break // the server answered an error and closed
		}
		c.in = append(c.in, p...)
		for turns := 0; !c.closed && (turns == 0 || c.wakes > 0); turns++ {
			c.wakes = 0
			r.turn(c)
		}
	}
	res.closed = c.closed
	_ = c.closeNow() // a half-close ends a plain session as a close does
	res.replies = c.out
	return res
}

// fuzzModel is what the protocol rules say about an input.
type fuzzModel struct {
	firstValidAcquire bool          // the input begins with a complete valid ACQUIRE
	valid             int           // complete valid frames before the first violation
	violation         protocol.Code // the first violation's code; 0: none
	lease             uint32        // the session's lease once registered
	released          bool          // a RELEASE after the ACQUIRE ended the session: nothing after it is read
}

func fuzzPredict(b []byte) fuzzModel {
	var m fuzzModel
	var f protocol.Frame
	for len(b) > 0 {
		n, err := protocol.DecodeClient(b, &f)
		var pe *protocol.Error
		switch {
		case errors.As(err, &pe):
			m.violation = pe.Code
		case err != nil:
			m.violation = protocol.CodeUnknownMessageType
		case n == 0:
			return m // an incomplete frame: closed at io-timeout, silently
		case (f.Type == protocol.TypeHeartbeat || f.Type == protocol.TypeRelease) && m.lease == 0:
			m.violation = protocol.CodeFirstMessageNotAcquire
		case f.Type == protocol.TypeAcquire && m.lease != 0:
			m.violation = protocol.CodeDuplicateAcquire
		case f.Type == protocol.TypeRelease:
			m.released = true // answered by the server's close, not a frame
			return m
		}
		if m.violation != 0 {
			return m
		}
		if f.Type == protocol.TypeAcquire {
			m.lease = f.LeaseMS
			m.firstValidAcquire = m.valid == 0
		}
		m.valid++
		b = b[n:]
	}
	return m
}

// fuzzCheck holds the answers to the rules.
func fuzzCheck(t *testing.T, data []byte, ex fuzzResult) {
	m := fuzzPredict(data)
	describe := func() string {
		return fmt.Sprintf("input %x (split %v, half-close %v), answers %x, closed by the server %v", fuzzAbbrev(data), ex.split, ex.halfClose, fuzzAbbrev(ex.replies), ex.closed)
	}
	var frames []wire.Frame
	b := ex.replies
	for len(b) > 0 {
		var f protocol.Frame
		n, err := protocol.DecodeServer(b, &f)
		if err != nil {
			t.Fatalf("answer %d is not a server frame (at byte %d): %v; %s", len(frames)+1, len(ex.replies)-len(b), err, describe())
		}
		if n == 0 {
			t.Fatalf("the answers end in an incomplete frame %x; %s", b, describe())
		}
		frames = append(frames, wire.Frame{Type: f.Type, Token: f.Token, Code: f.Code, Reason: string(f.Reason)})
		b = b[n:]
	}

	var token uint64
	for i, f := range frames {
		switch f.Type {
		case protocol.TypeError:
			if i != len(frames)-1 {
				t.Fatalf("%v is answer %d of %d: an ERROR must be the last; %s", f, i+1, len(frames), describe())
			}
			if f.Code < protocol.CodeUnsupportedVersion || f.Code > protocol.CodeInvalidLease {
				t.Fatalf("%v: not a client-error code 0x10–0x17; %s", f, describe())
			}
			if f.Code != m.violation {
				t.Fatalf("%v, but the input's first violation is %s; %s", f, fuzzCodeText(m.violation), describe())
			}
			if err := wire.CheckReason(f); err != nil {
				t.Fatalf("%v; %s", err, describe())
			}
			if !ex.closed {
				t.Fatalf("%v, and the connection left open; %s", f, describe())
			}
		case protocol.TypeAcquired:
			if token != 0 && f.Token != token {
				t.Fatalf("ACQUIRED(%d) after ACQUIRED(%d): a session keeps its token; %s", f.Token, token, describe())
			}
			token = f.Token
		case protocol.TypeWaiting:
			if token != 0 {
				t.Fatalf("WAITING after ACQUIRED; %s", describe())
			}
		}
	}
	// One answer per valid frame, and one more if a waiter is promoted.
	if answers := len(frames); answers > m.valid+2 || (m.violation == 0 && answers > m.valid+1) {
		t.Fatalf("%d answers to %d valid frames; %s", answers, m.valid, describe())
	}
	if m.firstValidAcquire {
		if len(frames) == 0 || (frames[0].Type != protocol.TypeWaiting && frames[0].Type != protocol.TypeAcquired) {
			t.Fatalf("a valid ACQUIRE first, answered %v; want WAITING or ACQUIRED first; %s", frames, describe())
		}
	}
	if m.violation != 0 && m.valid == 0 && (len(frames) != 1 || frames[0].Type != protocol.TypeError) {
		t.Fatalf("the first frame is wrong (%s), answered %v; want that ERROR alone; %s", fuzzCodeText(m.violation), frames, describe())
	}
	if m.released && !ex.closed {
		t.Fatalf("RELEASE ended the session, but the server left the connection open; %s", describe())
	}
	// Every byte was handed to the loop before any close, and the clock
	// stands still: a violation is always answered.
	if m.violation != 0 && (len(frames) == 0 || frames[len(frames)-1].Type != protocol.TypeError) {
		t.Fatalf("closed without the input's %s; %s", fuzzCodeText(m.violation), describe())
	}
}

// fuzzHealth: a fresh client is served, and once it and every input's
// connection are closed, the loop holds nothing.
func fuzzHealth(t *testing.T, r *rig, n uint64) {
	c := r.acquire(fmt.Sprintf("fuzz-health-%d", n), farLeaseMS)
	if fs := c.takeReads(); len(fs) != 1 || fs[0].Type != protocol.TypeAcquired {
		t.Fatalf("a fresh client after input %d was answered %s; want ACQUIRED", n, framesText(fs))
	}
	_ = c.closeNow()
	o := r.o
	if o.sessions.len != 0 || o.table.Held() != 0 || o.table.Waiting() != 0 || o.wheel.Len() != 0 {
		t.Fatalf("after input %d and its connections closed: %d sessions, %d locks, %d waiters, %d timers; want none", n, o.sessions.len, o.table.Held(), o.table.Waiting(), o.wheel.Len())
	}
}

func fuzzCodeText(c protocol.Code) string {
	if c == 0 {
		return "no violation"
	}
	return fmt.Sprintf("ERROR 0x%02x (%v)", uint8(c), c)
}

// fuzzAbbrev shortens a byte string for a failure message.
func fuzzAbbrev(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}
