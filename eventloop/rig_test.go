package eventloop

import (
	"fmt"
	"time"

	"github.com/monolock/monolock/locktable"
	"github.com/monolock/monolock/protocol"
)

// Expectations on a rig, for the Go tests that drive the owner by hand. The
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

// quiet checks that p was sent nothing.
func (r *rig) quiet(p peer, what string) {
	r.t.Helper()
	if fs := p.takeReads(); len(fs) != 0 {
		r.t.Fatalf("%s: %v was sent %s at %v, want nothing", what, p, framesText(fs), r.now())
	}
}

// expectPromoted consumes the ACQUIRED pushed to p, whose token must exceed
// after, and returns the token.
func (r *rig) expectPromoted(p peer, after uint64) uint64 {
	r.t.Helper()
	f := r.one(p)
	if f.Type != protocol.TypeAcquired || f.Token <= after {
		r.t.Fatalf("%v: got %s, want ACQUIRED with a token above %d", p, frameText(f), after)
	}
	if p.s.claim.State() != locktable.Holding || p.s.claim.Token() != f.Token {
		r.t.Fatalf("%v: sent ACQUIRED(%d) but its claim is %v with token %d", p, f.Token, p.s.claim.State(), p.s.claim.Token())
	}
	return f.Token
}

func (r *rig) expectOpen(p peer, what string) {
	r.t.Helper()
	if p.closed || p.s.closed {
		r.t.Fatalf("%s: %v was closed at %v (%v); now %v", what, p, p.closedAt, p.s.closeReason, r.now())
	}
}

// expectClosed checks that p was closed for reason at a time in [lo, hi].
func (r *rig) expectClosed(p peer, reason ReleaseReason, lo, hi time.Duration) {
	r.t.Helper()
	switch {
	case !p.closed || !p.s.closed:
		r.t.Fatalf("%v still open at %v, want closed (%v) within [%v, %v]", p, r.now(), reason, lo, hi)
	case p.s.closeReason != reason:
		r.t.Fatalf("%v closed at %v for %v, want %v", p, p.closedAt, p.s.closeReason, reason)
	case p.closedAt < lo || p.closedAt > hi:
		r.t.Fatalf("%v closed (%v) at %v, want within [%v, %v]", p, reason, p.closedAt, lo, hi)
	}
}

// until moves the clock forward to at, ticking where the owner planned.
func (r *rig) until(at time.Duration) {
	r.t.Helper()
	if now := r.now(); at < now {
		r.t.Fatalf("until %v: the clock is already at %v", at, now)
	}
	r.runTo(at)
}

// tick hands the owner a tick now although it planned none, as the ticker
// does whenever another session's timer is due: on a busy server, every
// millisecond.
func (r *rig) tick() { r.o.tick() }

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
