package eventloop_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/monolock/monolock/eventloop"
	"github.com/monolock/monolock/internal/testsupport/wire"
	"github.com/monolock/monolock/protocol"
)

// FuzzServer feeds the server arbitrary byte streams over a real connection
// and checks what comes back against the protocol's rules: the answers are a
// clean sequence of server frames, at most one ERROR and only as the last
// frame, always a client-error code and always the code of the input's
// first violation; a valid ACQUIRE is answered WAITING or ACQUIRED, a
// session keeps one token and never goes back from ACQUIRED to WAITING.
// Every so often a fresh client must still be served and, once every input
// connection is closed, the server must hold nothing (no session, lock,
// waiter or timer).
//
// Arguments: the bytes, a split point (two writes when it falls inside the
// input) and whether to half-close the write side after them (the server
// then answers what it read and closes; otherwise the exchange ends once
// the answers stop coming).
//
// Seeds are in testdata/fuzz/FuzzServer. Long runs:
//
//	go test -run '^$' -fuzz '^FuzzServer$' -fuzztime 5m ./eventloop/
func FuzzServer(f *testing.F) {
	// One server per fuzzing process, shared by every input it runs.
	ts := startServer(f, fuzzIOTimeout)
	addr := ts.Addr().String()
	f.Add(protocol.AppendAcquire(protocol.AppendAcquire(nil, 1000, string(bytes.Repeat([]byte("n"), protocol.MaxNameLen))), 1000, "x"), uint16(263), true)
	f.Add(append(protocol.AppendAcquire(nil, 1, "short-lease"), bytes.Repeat(wire.Heartbeat, 2000)...), uint16(0), false)

	var inputs atomic.Uint64
	f.Fuzz(func(t *testing.T, data []byte, split uint16, halfClose bool) {
		n := inputs.Add(1)
		if len(data) > fuzzMaxInput {
			data = data[:fuzzMaxInput]
		}
		ex := fuzzExchange(t, addr, data, int(split), halfClose)
		fuzzCheck(t, data, ex)
		if n%fuzzHealthEvery == 1 {
			fuzzHealth(t, ts, n)
		}
	})
}

const (
	fuzzIOTimeout = 200 * time.Millisecond
	// fuzzMaxInput keeps one input's work small; 64 KiB of heartbeats still
	// make half a megabyte of answers.
	fuzzMaxInput = 64 << 10
	// fuzzIdle ends an exchange that the server keeps open (a valid session
	// without a half-close): no answer for this long means none is coming.
	fuzzIdle = 30 * time.Millisecond
	// fuzzHealthEvery: a fresh client and an empty server every so many inputs.
	fuzzHealthEvery = 64
	// fuzzEagerFrames: the server answers this many frames of one read in a
	// single turn (a turn parses up to bytesPerTurn, 64 KiB), so a violation
	// among them is answered before a half-close that follows the input is
	// noticed.
	fuzzEagerFrames = 256
	// fuzzSafeLease: a session with a shorter lease may expire in the middle
	// of an exchange on a loaded machine, closing it without an ERROR.
	fuzzSafeLease = 5000
)

// fuzzEnd is how an exchange ended.
type fuzzEnd int

const (
	endEOF   fuzzEnd = iota // the server closed the connection
	endReset                // the server reset it (it closed with our bytes unread)
	endIdle                 // no more answers came; we stopped reading
)

func (e fuzzEnd) String() string {
	return [...]string{"EOF", "reset", "idle"}[e]
}

type fuzzResult struct {
	replies   []byte
	end       fuzzEnd
	split     bool // the input went out in two writes
	halfClose bool
}

// fuzzExchange sends data (in two writes when split falls inside it),
// half-closes or not, and collects every answer until the server closes or
// goes quiet. A reader runs alongside the writes so that the server's output
// never backs up into its input.
func fuzzExchange(t *testing.T, addr string, data []byte, split int, halfClose bool) fuzzResult {
	nc, err := net.DialTimeout("tcp", addr, safety)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	tc := nc.(*net.TCPConn)
	defer tc.Close()
	if err := tc.SetNoDelay(true); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_ = tc.SetReadDeadline(start.Add(safety))

	type read struct {
		b   []byte
		err error
	}
	var received atomic.Int64
	done := make(chan read, 1)
	go func() {
		var b []byte
		chunk := make([]byte, 16<<10)
		for {
			n, err := tc.Read(chunk)
			b = append(b, chunk[:n]...)
			received.Store(int64(len(b)))
			if err != nil {
				done <- read{b, err}
				return
			}
		}
	}()

	parts := [][]byte{data}
	if split > 0 && split < len(data) {
		parts = [][]byte{data[:split], data[split:]}
	}
	for i, p := range parts {
		if i > 0 {
			time.Sleep(time.Millisecond) // let the first part arrive on its own
		}
		_ = tc.SetWriteDeadline(time.Now().Add(safety))
		if _, err := tc.Write(p); err != nil {
			if fuzzClosedByPeer(err) {
				break // the server answered an error and closed
			}
			t.Fatalf("write %d of %d bytes: %v", i+1, len(data), err)
		}
	}
	if halfClose {
		_ = tc.CloseWrite()
	}

	// A first frame that is complete, or already wrong, is answered at once:
	// wait for that answer however long it takes (up to safety).
	var first protocol.Frame
	n, derr := protocol.DecodeClient(data, &first)
	awaitFirst := n > 0 || derr != nil
	res := fuzzResult{split: len(parts) > 1, halfClose: halfClose}
	last, lastChange := received.Load(), time.Now()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case r := <-done:
			res.replies = r.b
			switch {
			case errors.Is(r.err, io.EOF):
				res.end = endEOF
			case fuzzClosedByPeer(r.err):
				res.end = endReset
			case errors.Is(r.err, os.ErrDeadlineExceeded) && !halfClose && !(awaitFirst && len(r.b) == 0):
				res.end = endIdle
			default:
				t.Fatalf("reading the answers (%d bytes so far, %v after connecting, half-close %v): %v", len(r.b), time.Since(start), halfClose, r.err)
			}
			return res
		case <-tick.C:
		}
		if halfClose {
			continue // the server closes once it has read everything
		}
		if got := received.Load(); got != last {
			last, lastChange = got, time.Now()
		}
		if (last > 0 || !awaitFirst) && time.Since(lastChange) >= fuzzIdle {
			_ = tc.SetReadDeadline(time.Now()) // ends the reader
		}
	}
}

// fuzzModel is what the protocol rules say about an input.
type fuzzModel struct {
	firstValidAcquire bool          // the input begins with a complete valid ACQUIRE
	valid             int           // complete valid frames before the first violation
	violation         protocol.Code // the first violation's code; 0: none
	lease             uint32        // the session's lease once registered
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
		case f.Type == protocol.TypeHeartbeat && m.lease == 0:
			m.violation = protocol.CodeFirstMessageNotAcquire
		case f.Type == protocol.TypeAcquire && m.lease != 0:
			m.violation = protocol.CodeDuplicateAcquire
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
		return fmt.Sprintf("input %x (split %v, half-close %v), answers %x ending in %v", fuzzAbbrev(data), ex.split, ex.halfClose, fuzzAbbrev(ex.replies), ex.end)
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
			if ex.end != endIdle {
				t.Fatalf("the answers end in an incomplete frame %x; %s", b, describe())
			}
			break
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
	// The server read the whole input before it saw the half-close, so a
	// violation in it is answered, unless the session could have expired or
	// the violation lies beyond what one turn answers.
	mustAnswer := ex.halfClose && !ex.split && ex.end != endIdle && m.violation != 0 &&
		m.valid < fuzzEagerFrames && (m.lease == 0 || m.lease >= fuzzSafeLease)
	if mustAnswer && (len(frames) == 0 || frames[len(frames)-1].Type != protocol.TypeError) {
		t.Fatalf("closed without the input's %s; %s", fuzzCodeText(m.violation), describe())
	}
}

// fuzzHealth: a fresh client is served, and once it and every input's
// connection are closed, the server holds nothing.
func fuzzHealth(t *testing.T, ts *testServer, n uint64) {
	c := dial(t, ts, "health check")
	c.SendAcquire(fmt.Sprintf("fuzz-health-%d", n), longLease)
	c.ExpectAcquired()
	c.Close()
	ts.waitStats(t, eventloop.Stats{})
}

func fuzzClosedByPeer(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
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
