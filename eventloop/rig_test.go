package eventloop

import (
	"fmt"
	"time"

	"github.com/monolock/monolock/protocol"
)

// Expectations on a rig, for the Go tests that drive the loop by hand. The
// rules themselves are scripts (testdata/rules, run by script_test.go); the
// socket tests check the same rules end to end.

const (
	ms = time.Millisecond
	// farLeaseMS is a lease that never ends within a test: waiters whose
	// own expiry is not the point.
	farLeaseMS = 1 << 30
)

var heartbeat = protocol.AppendHeartbeat(nil)

// peer is a rig connection with its session, which the connection forgets
// when it closes.
type peer struct {
	*fakeConn
	s *session
}

func (r *rig) peer() peer {
	c := r.connect()
	return peer{c, c.session()}
}

// claim connects and sends ACQUIRE. The reply is consumed; the token is
// returned, 0 for WAITING.
func (r *rig) claim(name string, leaseMS uint32) (peer, uint64) {
	r.t.Helper()
	c := r.acquire(name, leaseMS)
	p := peer{c, c.session()}
	return p, r.state(p)
}

// state consumes the one reply p must have: its token for ACQUIRED, 0 for
// WAITING.
func (r *rig) state(p peer) uint64 {
	r.t.Helper()
	f := r.one(p)
	switch f.Type {
	case protocol.TypeAcquired:
		return f.Token
	case protocol.TypeWaiting:
		return 0
	}
	r.t.Fatalf("%v: got %s, want ACQUIRED or WAITING", p, frameText(f))
	return 0
}

// one consumes the one frame p must have been sent.
func (r *rig) one(p peer) protocol.Frame {
	r.t.Helper()
	fs := p.takeReads()
	if len(fs) != 1 {
		r.t.Fatalf("%v: got %s at %v, want one frame", p, framesText(fs), r.now())
	}
	return fs[0]
}

// heartbeats returns n heartbeats.
func heartbeats(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = heartbeat[0]
	}
	return b
}

func frameText(f protocol.Frame) string {
	switch f.Type {
	case protocol.TypeAcquired:
		return fmt.Sprintf("ACQUIRED(%d)", f.Token)
	case protocol.TypeWaiting:
		return "WAITING"
	case protocol.TypeError:
		return fmt.Sprintf("ERROR 0x%02x %q", uint8(f.Code), f.Reason)
	}
	return fmt.Sprintf("frame type 0x%02x", uint8(f.Type))
}

func framesText(fs []protocol.Frame) string {
	s := fmt.Sprintf("%d frames", len(fs))
	for i, f := range fs {
		if i == 4 {
			return s + " ..."
		}
		s += " " + frameText(f)
	}
	return s
}
