package eventloop

import (
	"fmt"
	"testing"
	"time"

	"github.com/monolock/monolock/locktable"
	"github.com/monolock/monolock/protocol"
)

// The owner's rules, driven by hand: a fake clock, fake connections, and the
// ticker's job done by rig.run. Every time below is an offset on the owner's
// clock (owner.now). Nothing sleeps and no socket is opened, so each rule is
// checked at its exact boundaries: never before the deadline, and within one
// wheel tick (or one stall poll) after it. The socket tests check the same
// rules end to end.

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

// expectToken consumes ACQUIRED(tok).
func (r *rig) expectToken(p peer, tok uint64) {
	r.t.Helper()
	if f := r.one(p); f.Type != protocol.TypeAcquired || f.Token != tok {
		r.t.Fatalf("%v: got %s, want ACQUIRED(%d)", p, frameText(f), tok)
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

// expectError consumes ERROR(code).
func (r *rig) expectError(p peer, code protocol.Code) {
	r.t.Helper()
	if f := r.one(p); f.Type != protocol.TypeError || f.Code != code {
		r.t.Fatalf("%v: got %s, want ERROR 0x%02x", p, frameText(f), uint8(code))
	}
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

// expectQueue checks the holder and the queue of lock name.
func (r *rig) expectQueue(name string, holder peer, waiters ...peer) {
	r.t.Helper()
	if h := r.o.table.Holder(name); h == nil || h.Value != holder.s {
		r.t.Fatalf("lock %q: holder is not %v", name, holder)
	}
	i := 0
	for c := range r.o.table.Waiters(name) {
		if i >= len(waiters) || c.Value != waiters[i].s {
			r.t.Fatalf("lock %q: waiter %d is %v, want %v in order", name, i, c.Value.remoteAddr(), waiters)
		}
		i++
	}
	if i != len(waiters) {
		r.t.Fatalf("lock %q: %d waiters, want %v", name, i, waiters)
	}
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

// Rule 1: a lease ends strictly after lastSeen + lease, and within one wheel
// tick after that; a heartbeat at the last moment keeps the lock, and the
// lease then counts from that heartbeat. The next waiter is promoted at once.
// The phase places the ACQUIRE between two ticks: one nanosecond before a
// tick puts the first instant past the lease exactly on a tick.
func TestRuleLeaseExpiry(t *testing.T) {
	const s = time.Second
	for _, tc := range []struct {
		name    string
		leaseMS uint32
		phase   time.Duration   // the ACQUIRE's offset after a tick
		beats   []time.Duration // heartbeats, after the ACQUIRE
	}{
		{"1ms", 1, 0, nil},
		{"1ms off tick", 1, 400 * time.Microsecond, nil},
		{"1ms one ns before a tick", 1, ms - 1, nil},
		{"1ms beats each at the last moment", 1, 0, []time.Duration{1 * ms, 2 * ms, 3 * ms}},
		{"7ms", 7, 0, nil},
		{"7ms one ns before a tick", 7, ms - 1, nil},
		{"7ms beat, then a beat at the last moment", 7, 0, []time.Duration{3 * ms, 10 * ms}},
		{"7ms beats off tick, the last at the last moment", 7, 250 * time.Microsecond, []time.Duration{6*ms + 1, 13*ms + 1}},
		{"2s", 2000, 0, nil},
		{"2s one ns before a tick", 2000, ms - 1, nil},
		{"2s beat at the last moment", 2000, 0, []time.Duration{2 * s, 4 * s}},
		{"65s, longer than a turn of the wheel", 65000, 0, nil},
		{"65s one ns before a tick", 65000, ms - 1, nil},
		{"65s beats off tick, the last at the last moment", 65000, 123 * time.Microsecond, []time.Duration{30*s + 1, 95*s + 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, Config{})
			r.run(tc.phase)
			const lock = "lease"
			h, t1 := r.claim(lock, tc.leaseMS)
			w, wt := r.claim(lock, farLeaseMS)
			if t1 == 0 || wt != 0 {
				t.Fatalf("holder token %d, waiter token %d", t1, wt)
			}
			lease := time.Duration(tc.leaseMS) * ms
			acquired := h.s.lastSeen
			if acquired != r.now() {
				t.Fatalf("lastSeen %v after an ACQUIRE at %v", acquired, r.now())
			}
			lastSeen := acquired
			for _, b := range tc.beats {
				at := acquired + b
				if at > lastSeen+lease {
					t.Fatalf("bad case: a beat at %v, after the lease ended at %v", at, lastSeen+lease)
				}
				r.until(at)
				r.tick() // a tick at the same instant, before the heartbeat
				r.expectOpen(h, fmt.Sprintf("holder at its heartbeat %v (lease from %v)", at, lastSeen))
				r.send(h.fakeConn, heartbeat)
				r.expectToken(h, t1)
				lastSeen = at
			}
			deadline := lastSeen + lease
			r.until(deadline)
			r.tick()
			r.expectOpen(h, "holder at lastSeen+lease")
			r.quiet(w, "waiter while the lock is held")
			r.run(wheelTick)
			r.expectClosed(h, ReleaseExpired, deadline+1, deadline+wheelTick)
			r.quiet(h, "expired holder") // closed without an ERROR
			r.expectPromoted(w, t1)
			if w.s.since != h.closedAt {
				t.Fatalf("waiter granted at %v, holder closed at %v", w.s.since, h.closedAt)
			}
			r.expectQueue(lock, w)
		})
	}
}

// Rule 1 at the exact boundary. The lease timer fires only on wheel ticks,
// and the first tick at or after lastSeen+lease+1ns is one past the
// boundary; but a session whose output is stalled is polled every stallPoll,
// and a poll can land exactly on lastSeen+lease, or (ACQUIRE one ns before a
// tick) exactly on the first instant past it. The first must not expire the
// lease, the second must.
func TestRuleLeaseExpiryOnStallPoll(t *testing.T) {
	for _, tc := range []struct {
		leaseMS uint32
		phase   time.Duration
	}{
		{10, 0}, {30, 0}, {100, 0}, {2000, 0}, // a poll at lastSeen+lease
		{10, ms - 1}, {30, ms - 1}, {2000, ms - 1}, // a poll at lastSeen+lease+1ns
		{7, 0}, {25, 0}, {25, ms - 1}, // no poll on the boundary
	} {
		t.Run(fmt.Sprintf("%dms phase %v", tc.leaseMS, tc.phase), func(t *testing.T) {
			r := newRig(t, Config{IOTimeout: time.Hour}) // the stall itself ends nothing here
			r.run(tc.phase)
			const lock = "stalled"
			h := r.peer()
			h.stuck = true // the ACQUIRED stays outbound: polled from now on
			r.send(h.fakeConn, protocol.AppendAcquire(nil, tc.leaseMS, lock))
			t1 := r.state(h)
			w, _ := r.claim(lock, farLeaseMS)
			lease := time.Duration(tc.leaseMS) * ms
			deadline := h.s.lastSeen + lease
			onPoll := lease%stallPoll == 0
			if onPoll {
				r.until(deadline - 1)
				due, _ := r.o.wheel.Deadline(&h.s.timer)
				want := deadline
				if tc.phase != 0 {
					want = deadline + 1 // the poll and the first instant past the lease
				}
				if due != want {
					t.Fatalf("the holder's next poll is at %v, want %v", due, want)
				}
			}
			r.until(deadline)
			if tc.phase != 0 && onPoll {
				r.until(deadline + 1) // the poll lands here, one past the boundary
				r.expectClosed(h, ReleaseExpired, deadline+1, deadline+1)
			} else {
				r.expectOpen(h, "stalled holder polled at lastSeen+lease")
				if due, _ := r.o.wheel.Deadline(&h.s.timer); onPoll && due != deadline+wheelTick {
					t.Fatalf("after the poll at %v the timer is due at %v, want the lease's end %v", deadline, due, deadline+wheelTick)
				}
				r.run(wheelTick)
				r.expectClosed(h, ReleaseExpired, deadline+1, deadline+wheelTick)
			}
			r.expectPromoted(w, t1)
		})
	}
}

// Rule 2: a connection that does not complete its ACQUIRE is closed
// io-timeout after it was accepted, not before, whatever it sent meanwhile,
// and without an ERROR.
func TestRuleIOTimeoutBeforeAcquire(t *testing.T) {
	const io = time.Second
	acq := protocol.AppendAcquire(nil, 10_000, "late")
	type piece struct {
		at time.Duration // after the accept
		b  []byte
	}
	for _, tc := range []struct {
		name   string
		phase  time.Duration
		pieces []piece
	}{
		{"silent", 0, nil},
		{"silent off tick", 400 * time.Microsecond, nil},
		{"silent one ns before a tick", ms - 1, nil},
		{"partial ACQUIRE at once", 0, []piece{{0, acq[:5]}}},
		{"partial ACQUIRE late, more bytes later", 0, []piece{{300 * ms, acq[:3]}, {900 * ms, acq[3:7]}}},
		{"ACQUIRE one byte short, one ns before io-timeout", 400 * time.Microsecond, []piece{{io - 1, acq[:len(acq)-1]}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, Config{IOTimeout: io})
			r.run(tc.phase)
			c := r.peer()
			since := r.now()
			for _, p := range tc.pieces {
				r.until(since + p.at)
				r.send(c.fakeConn, p.b)
			}
			r.until(since + io - 1)
			r.tick()
			r.expectOpen(c, "connection just before io-timeout")
			r.run(wheelTick)
			r.expectClosed(c, ReleaseIOTimeout, since+io, since+io+wheelTick-1)
			r.quiet(c, "timed-out connection")
			if r.o.sessions.len != 0 || r.o.wheel.Len() != 0 {
				t.Fatalf("%d sessions and %d timers left", r.o.sessions.len, r.o.wheel.Len())
			}
		})
	}
}

// Rule 2: an ACQUIRE completed within io-timeout, however it was split,
// cancels the io-timeout: the session lives on to its lease.
func TestRuleIOTimeoutAcquireInTime(t *testing.T) {
	const io = time.Second
	acq := protocol.AppendAcquire(nil, 10_000, "in time")
	type piece struct {
		at time.Duration
		b  []byte
	}
	for _, tc := range []struct {
		name   string
		pieces []piece
	}{
		{"whole, one ns before io-timeout", []piece{{io - 1, acq}}},
		{"dripped, the last byte one ns before", []piece{{0, acq[:1]}, {io / 2, acq[1:8]}, {io - 1, acq[8:]}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, Config{IOTimeout: io})
			c := r.peer()
			since := r.now()
			for _, p := range tc.pieces {
				r.until(since + p.at)
				r.send(c.fakeConn, p.b)
			}
			if tok := r.state(c); tok == 0 {
				t.Fatal("WAITING on a free lock")
			}
			if c.s.partialSince != 0 {
				t.Fatalf("partialSince %v after a complete frame", c.s.partialSince)
			}
			r.until(since + io)
			r.tick()
			r.run(2 * io)
			r.expectOpen(c, "session past io-timeout")
		})
	}
}

// Rule 2: a frame left half-sent after the ACQUIRE ends the session
// io-timeout after its first byte arrived (later bytes do not restart the
// clock, earlier frames do not count), although its lease is far from over;
// the lock passes on at once. Completing the frame in time cancels that: the
// frame is then judged as a frame.
func TestRuleIOTimeoutHalfSentFrame(t *testing.T) {
	const io = time.Second
	dup := protocol.AppendAcquire(nil, 1000, "other") // 13 bytes: after an ACQUIRE, a duplicate
	hbDup := append(append([]byte{}, heartbeat...), dup[:5]...)
	type piece struct {
		at time.Duration // after the ACQUIRE
		b  []byte
	}
	for _, tc := range []struct {
		name     string
		phase    time.Duration
		pieces   []piece
		began    time.Duration // when the half-sent frame began
		complete bool          // the last piece completes it
	}{
		{"5 bytes", 0, []piece{{100 * ms, dup[:5]}}, 100 * ms, false},
		{"5 bytes off tick", 400 * time.Microsecond, []piece{{100 * ms, dup[:5]}}, 100 * ms, false},
		{"more bytes later do not restart the clock", 0, []piece{{0, dup[:2]}, {io / 2, dup[2:5]}, {io - 1, dup[5:12]}}, 0, false},
		{"earlier heartbeats do not count", ms - 1, []piece{{200 * ms, heartbeat}, {700 * ms, heartbeat}, {700*ms + 3, dup[:1]}}, 700*ms + 3, false},
		{"after a heartbeat in the same segment", 0, []piece{{300 * ms, hbDup}}, 300 * ms, false},
		{"completed one ns before io-timeout", 0, []piece{{100 * ms, dup[:5]}, {100*ms + io - 1, dup[5:]}}, 100 * ms, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, Config{IOTimeout: io})
			r.run(tc.phase)
			const lock = "half-sent"
			h, t1 := r.claim(lock, farLeaseMS)
			w, _ := r.claim(lock, farLeaseMS)
			acquired := r.now()
			var errs []protocol.Frame
			for _, p := range tc.pieces {
				r.until(acquired + p.at)
				r.send(h.fakeConn, p.b)
				for _, f := range h.takeReads() {
					if f.Type != protocol.TypeAcquired || f.Token != t1 {
						errs = append(errs, f)
					}
				}
			}
			began := acquired + tc.began
			if tc.complete {
				if len(errs) != 1 || errs[0].Type != protocol.TypeError || errs[0].Code != protocol.CodeDuplicateAcquire {
					t.Fatalf("holder got %s, want ERROR 0x12 for the completed frame", framesText(errs))
				}
				r.expectClosed(h, ReleaseProtocolError, began+io-1, began+io-1)
			} else {
				if len(errs) != 0 {
					t.Fatalf("holder got %s", framesText(errs))
				}
				if h.s.partialSince != began {
					t.Fatalf("partialSince %v, want %v", h.s.partialSince, began)
				}
				r.until(began + io - 1)
				r.tick()
				r.expectOpen(h, "holder just before io-timeout")
				r.quiet(w, "waiter")
				r.run(wheelTick)
				r.expectClosed(h, ReleaseIOTimeout, began+io, began+io+wheelTick-1)
				r.quiet(h, "timed-out holder")
			}
			r.expectPromoted(w, t1)
			if w.s.since != h.closedAt {
				t.Fatalf("waiter granted at %v, holder closed at %v", w.s.since, h.closedAt)
			}
		})
	}
}

// Rule 2: output the peer does not drain ends the session once it has been
// waiting for io-timeout (checked every stallPoll), not before. More output
// meanwhile does not restart that clock, and draining part of it does not
// stop it; only empty output does.
func TestRuleIOTimeoutUndrainedOutput(t *testing.T) {
	type event struct {
		at time.Duration // after the stall began
		do func(r *rig, h peer)
	}
	beat := func(r *rig, h peer) {
		r.send(h.fakeConn, heartbeat)
		h.takeReads() // written, and left outbound
	}
	drain := func(_ *rig, h peer) { h.drain() }
	for _, tc := range []struct {
		name   string
		io     time.Duration
		events []event
		stall  time.Duration // when the stall that ends the session began; -1: none does
	}{
		{"never drained", time.Second, nil, 0},
		{"io-timeout not a multiple of the poll", 1005 * ms, nil, 0},
		{"more output meanwhile", time.Second, []event{{300 * ms, beat}, {999 * ms, beat}}, 0},
		{"partly drained", time.Second, []event{{200 * ms, beat}, {500 * ms, func(_ *rig, h peer) { h.pending = 1 }}}, 0},
		{"drained one ns before io-timeout", time.Second, []event{{time.Second - 1, drain}}, -1},
		{"drained, then stalled again: a new clock", time.Second, []event{{500 * ms, drain}, {700 * ms, func(r *rig, h peer) { h.stuck = true; beat(r, h) }}}, 700 * ms},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, Config{IOTimeout: tc.io})
			const lock = "stuck"
			h, t1 := r.claim(lock, farLeaseMS)
			w, _ := r.claim(lock, farLeaseMS)
			r.run(100 * ms)
			h.stuck = true
			beat(r, h)
			start := r.now()
			if h.s.stalledSince != start {
				t.Fatalf("stalledSince %v, want %v", h.s.stalledSince, start)
			}
			for _, e := range tc.events {
				r.until(start + e.at)
				e.do(r, h)
			}
			if tc.stall < 0 {
				r.until(start + 3*tc.io)
				r.expectOpen(h, "holder that drained in time")
				if h.s.stalledSince != 0 {
					t.Fatalf("stalledSince %v after the output drained", h.s.stalledSince)
				}
				r.quiet(w, "waiter")
				return
			}
			began := start + tc.stall
			r.until(began + tc.io - 1)
			r.tick()
			r.expectOpen(h, "holder just before io-timeout")
			r.run(stallPoll)
			r.expectClosed(h, ReleaseIOTimeout, began+tc.io, began+tc.io+stallPoll)
			r.expectPromoted(w, t1)
		})
	}
}

// Rule 3: the backlog and unparsed-input limits of one turn. Parsing stops
// once outboundLimit bytes wait outbound (backlogged) and more than
// inboundLimit unparsed bytes then close the session; more than maxUnparsed
// close it even when its output drains; a turn parses at most bytesPerTurn
// and asks for another with Wake. What is left is parsed later: in the turns
// asked for, or, when backlogged, at the first stall poll after the peer
// drained.
func TestRuleBacklog(t *testing.T) {
	for _, tc := range []struct {
		name       string
		stuck      bool
		pending    int // outbound bytes already waiting
		input      int // heartbeats sent at once
		closed     bool
		backlogged bool
		parsed     int // heartbeats parsed in the first turn; -1: at least one, less than input
		wakes      int
	}{
		{"output at the limit: nothing parsed, inboundLimit kept", true, outboundLimit, inboundLimit, false, true, 0, 0},
		{"output at the limit: one byte more closes", true, outboundLimit, inboundLimit + 1, true, true, 0, 0},
		{"output one byte under the limit: parsed until a batch reaches it", true, outboundLimit - 1, inboundLimit + 1, false, true, -1, 0},
		{"replies fill the output: parsing stops", true, 0, inboundLimit, false, true, -1, 0},
		{"replies fill the output, the rest beyond inboundLimit closes", true, 0, 2 * inboundLimit, true, true, -1, 0},
		{"exactly bytesPerTurn: one turn", false, 0, bytesPerTurn, false, false, bytesPerTurn, 0},
		{"bytesPerTurn+10: another turn for the rest", false, 0, bytesPerTurn + 10, false, false, bytesPerTurn, 1},
		{"maxUnparsed left over is kept", false, 0, bytesPerTurn + maxUnparsed, false, false, bytesPerTurn, 1},
		{"one byte beyond maxUnparsed closes, though output drains", false, 0, bytesPerTurn + maxUnparsed + 1, true, false, bytesPerTurn, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, Config{})
			const lock = "backlog"
			h, t1 := r.claim(lock, farLeaseMS)
			w, _ := r.claim(lock, farLeaseMS)
			h.stuck, h.pending = tc.stuck, tc.pending
			h.keep = false // count replies, do not keep them
			n0 := h.n
			r.send(h.fakeConn, heartbeats(tc.input))
			parsed := (h.n - n0) / protocol.AcquiredLen
			sent := r.now()
			switch {
			case tc.parsed >= 0 && parsed != tc.parsed,
				tc.parsed < 0 && (parsed == 0 || parsed >= tc.input):
				t.Fatalf("parsed %d of %d heartbeats in the first turn, want %d", parsed, tc.input, tc.parsed)
			case h.wakes != tc.wakes:
				t.Fatalf("%d Wake calls, want %d", h.wakes, tc.wakes)
			case h.s.backlogged != tc.backlogged:
				t.Fatalf("backlogged %v, want %v", h.s.backlogged, tc.backlogged)
			}
			if tc.backlogged {
				if out := h.OutboundBuffered(); out < outboundLimit || out >= outboundLimit+replyBatch+protocol.AcquiredLen {
					t.Fatalf("parsing stopped with %d bytes outbound; the limit is %d, a batch %d", out, outboundLimit, replyBatch)
				}
			}
			if tc.closed {
				r.expectClosed(h, ReleaseIOTimeout, sent, sent)
				r.expectPromoted(w, t1)
				return
			}
			r.expectOpen(h, "holder")
			if rest := tc.input - parsed; len(h.in) != rest {
				t.Fatalf("%d bytes left unparsed, want %d", len(h.in), rest)
			}
			if tc.backlogged {
				// Nothing more is parsed until the peer drains; then the
				// next stall poll parses the rest, with no new input.
				r.until(sent + 3*ms)
				h.drain()
				r.until(sent + stallPoll - 1)
				r.tick()
				if h.n != n0+parsed*protocol.AcquiredLen {
					t.Fatalf("parsed %d more before the stall poll", (h.n-n0)/protocol.AcquiredLen-parsed)
				}
				r.until(sent + stallPoll)
			} else {
				for turns := 1; len(h.in) > 0; turns++ {
					if turns > tc.input/bytesPerTurn+1 {
						t.Fatalf("%d bytes left after %d turns", len(h.in), turns)
					}
					r.turn(h.fakeConn)
				}
				if h.wakes != tc.input/bytesPerTurn-1+min(tc.input%bytesPerTurn, 1) {
					t.Fatalf("%d Wake calls for %d bytes", h.wakes, tc.input)
				}
			}
			if got := (h.n - n0) / protocol.AcquiredLen; got != tc.input || len(h.in) != 0 {
				t.Fatalf("%d heartbeats answered, %d bytes left, want all %d", got, len(h.in), tc.input)
			}
			if h.s.backlogged || h.s.partialSince != 0 {
				t.Fatalf("backlogged %v, partialSince %v after parsing everything", h.s.backlogged, h.s.partialSince)
			}
			r.expectOpen(h, "holder")
			r.expectQueue(lock, h, w)
		})
	}
}

// Rule 3: input held back while backlogged is parsed at the first stall poll
// after the peer drains, with the usual consequences (a bad frame in it ends
// the session); a peer that never drains is closed after io-timeout.
func TestRuleBacklogAfterDrain(t *testing.T) {
	const io = time.Second
	for _, tc := range []struct {
		name    string
		input   []byte
		drainAt time.Duration // after the input; -1: never
		code    protocol.Code // an ERROR expected after the drain
		reason  ReleaseReason
		closed  bool
	}{
		{"heartbeats", heartbeats(100), 3 * ms, 0, 0, false},
		{"drained one ns before io-timeout", heartbeats(100), io - 1, 0, 0, false},
		{"heartbeats, then an unknown frame type", append(heartbeats(100), 0x7f), 3 * ms, protocol.CodeUnknownMessageType, ReleaseProtocolError, true},
		{"never drained", heartbeats(100), -1, 0, ReleaseIOTimeout, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, Config{IOTimeout: io})
			const lock = "drain"
			h, t1 := r.claim(lock, farLeaseMS)
			w, _ := r.claim(lock, farLeaseMS)
			h.stuck, h.pending = true, outboundLimit
			r.send(h.fakeConn, tc.input)
			sent := r.now()
			r.quiet(h, "backlogged holder")
			if !h.s.backlogged || len(h.in) != len(tc.input) {
				t.Fatalf("backlogged %v with %d of %d bytes unparsed", h.s.backlogged, len(h.in), len(tc.input))
			}
			if tc.drainAt < 0 {
				r.until(sent + io - 1)
				r.tick()
				r.expectOpen(h, "holder just before io-timeout")
				r.run(stallPoll)
				r.expectClosed(h, tc.reason, sent+io, sent+io)
				r.expectPromoted(w, t1)
				return
			}
			r.until(sent + tc.drainAt)
			h.drain()
			poll := sent + (tc.drainAt/stallPoll+1)*stallPoll
			r.until(poll - 1)
			r.tick()
			r.quiet(h, "holder before the poll")
			r.until(poll)
			fs := h.takeReads()
			if len(fs) != 100+min(int(tc.code), 1) {
				t.Fatalf("got %s at the poll, want 100 replies", framesText(fs))
			}
			for i, f := range fs[:100] {
				if f.Type != protocol.TypeAcquired || f.Token != t1 {
					t.Fatalf("reply %d: %s", i, frameText(f))
				}
			}
			if tc.closed {
				if f := fs[100]; f.Type != protocol.TypeError || f.Code != tc.code {
					t.Fatalf("got %s, want ERROR 0x%02x", frameText(f), uint8(tc.code))
				}
				r.expectClosed(h, tc.reason, poll, poll)
				r.expectPromoted(w, t1)
				return
			}
			r.expectOpen(h, "holder after the drain")
			if h.s.backlogged || h.s.stalledSince != 0 || len(h.in) != 0 {
				t.Fatalf("backlogged %v, stalledSince %v, %d bytes unparsed", h.s.backlogged, h.s.stalledSince, len(h.in))
			}
		})
	}
}

// Rule 4: however a holder ends, the next waiter in FIFO order is pushed
// ACQUIRED with a larger token in the same step (the close, or the tick that
// closes), and the later waiters stay WAITING in their order.
func TestRulePromotion(t *testing.T) {
	const (
		io       = 20 * ms // ends a half-sent frame or a stall before the lease
		leaseMS  = 50
		lockName = "promote"
	)
	for _, tc := range []struct {
		name   string
		end    func(r *rig, h peer)
		reason ReleaseReason
		code   protocol.Code // the ERROR the holder gets; 0: none
	}{
		{"client closes", func(_ *rig, h peer) { _ = h.closeNow() }, ReleaseGraceful, 0},
		{"write fails", func(r *rig, h peer) { h.failWrite = true; r.send(h.fakeConn, heartbeat) }, ReleaseGraceful, 0},
		{"unknown message type", func(r *rig, h peer) { r.send(h.fakeConn, []byte{0x7f}) }, ReleaseProtocolError, protocol.CodeUnknownMessageType},
		{"duplicate ACQUIRE", func(r *rig, h peer) { r.send(h.fakeConn, protocol.AppendAcquire(nil, 1000, "other")) }, ReleaseProtocolError, protocol.CodeDuplicateAcquire},
		{"unsupported version", func(r *rig, h peer) { r.send(h.fakeConn, []byte{0x01, 0x02}) }, ReleaseProtocolError, protocol.CodeUnsupportedVersion},
		{"heartbeats, then a zero lease", func(r *rig, h peer) {
			r.send(h.fakeConn, append(heartbeats(2), 0x01, 0x01, 0, 0, 0, 0))
			if fs := h.takeReads(); len(fs) != 3 || fs[2].Code != protocol.CodeInvalidLease {
				r.t.Fatalf("got %s", framesText(fs))
			}
		}, ReleaseProtocolError, 0},
		{"lease expiry", func(r *rig, _ peer) { r.run(leaseMS*ms + wheelTick) }, ReleaseExpired, 0},
		{"half-sent frame", func(r *rig, h peer) { r.send(h.fakeConn, []byte{0x01}); r.run(io) }, ReleaseIOTimeout, 0},
		{"undrained output", func(r *rig, h peer) {
			h.stuck = true
			r.send(h.fakeConn, heartbeat)
			h.takeReads()
			r.run(io)
		}, ReleaseIOTimeout, 0},
		{"Server.ForceRelease", func(r *rig, h peer) {
			want := h.s.claim.Token()
			tok, ok, err := r.server().ForceRelease(r.t.Context(), lockName)
			if err != nil || !ok || tok != want {
				r.t.Fatalf("ForceRelease = %d, %v, %v; want the holder's token %d", tok, ok, err, want)
			}
		}, ReleaseForce, protocol.CodeClosedByAdmin},
		{"closeByAdmin", func(r *rig, h peer) { r.turnOf(func() { r.o.closeByAdmin(h.s, "test") }) }, ReleaseForce, protocol.CodeClosedByAdmin},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, Config{IOTimeout: io})
			h, t1 := r.claim(lockName, leaseMS)
			ws := make([]peer, 3)
			for i := range ws {
				ws[i], _ = r.claim(lockName, farLeaseMS)
			}
			r.run(5 * ms)
			r.send(h.fakeConn, heartbeat) // the lease counts from here
			r.expectToken(h, t1)
			tc.end(r, h)
			switch {
			case !h.closed:
				t.Fatalf("holder still open at %v", r.now())
			case h.s.closeReason != tc.reason:
				t.Fatalf("holder closed for %v, want %v", h.s.closeReason, tc.reason)
			}
			if tc.code != 0 {
				r.expectError(h, tc.code)
			}
			r.quiet(h, "closed holder")
			// Pushed in the step that closed the holder, with no tick since.
			tok := r.expectPromoted(ws[0], t1)
			if ws[0].s.since != h.closedAt {
				t.Fatalf("waiter granted at %v, holder closed at %v", ws[0].s.since, h.closedAt)
			}
			r.quiet(ws[1], "second waiter")
			r.quiet(ws[2], "third waiter")
			r.expectQueue(lockName, ws[0], ws[1], ws[2])
			// And on down the queue.
			for i := 1; i < len(ws); i++ {
				_ = ws[i-1].closeNow()
				tok = r.expectPromoted(ws[i], tok)
				for _, later := range ws[i+1:] {
					r.quiet(later, "later waiter")
				}
				r.expectQueue(lockName, ws[i], ws[i+1:]...)
			}
		})
	}
}

// Rule 4: kicking a waiter (Server.KickWaiter, which is closeByAdmin on it)
// sends it ERROR 0x02 and closes it; the holder keeps the lock, nobody is
// promoted, and the other waiters keep their order. Kicking what is not a
// waiter, or force-releasing an idle lock, does nothing.
func TestRuleKickWaiter(t *testing.T) {
	const lock = "kick"
	for kicked := range 3 {
		t.Run(fmt.Sprintf("waiter %d of 3", kicked), func(t *testing.T) {
			r := newRig(t, Config{})
			srv := r.server()
			ctx := t.Context()
			h, t1 := r.claim(lock, farLeaseMS)
			ws := make([]peer, 3)
			for i := range ws {
				ws[i], _ = r.claim(lock, farLeaseMS)
			}
			for _, addr := range []string{h.RemoteAddr().String(), "192.0.2.1:1"} {
				if ok, err := srv.KickWaiter(ctx, lock, addr); ok || err != nil {
					t.Fatalf("KickWaiter(%s) = %v, %v: not a waiter", addr, ok, err)
				}
			}
			if ok, err := srv.KickWaiter(ctx, lock, ws[kicked].RemoteAddr().String()); !ok || err != nil {
				t.Fatalf("KickWaiter = %v, %v", ok, err)
			}
			k := ws[kicked]
			r.expectError(k, protocol.CodeClosedByAdmin)
			r.expectClosed(k, ReleaseForce, r.now(), r.now())
			rest := append(append([]peer{}, ws[:kicked]...), ws[kicked+1:]...)
			r.quiet(h, "holder")
			for _, w := range rest {
				r.quiet(w, "other waiter")
			}
			r.expectQueue(lock, h, rest...)
			r.send(h.fakeConn, heartbeat)
			r.expectToken(h, t1)

			_ = h.closeNow()
			tok := t1
			for i, w := range rest {
				tok = r.expectPromoted(w, tok)
				r.expectQueue(lock, w, rest[i+1:]...)
				_ = w.closeNow()
			}
			if _, ok, err := srv.ForceRelease(ctx, lock); ok || err != nil {
				t.Fatalf("ForceRelease of an idle lock = %v, %v", ok, err)
			}
		})
	}
}

// Rule 5: shutdown sends ERROR 0x01 to every session (holders, waiters, and
// those without an ACQUIRE) and closes them all, and no waiter is ever sent
// ACQUIRED, whichever of a lock's sessions it reaches first.
func TestRuleShutdown(t *testing.T) {
	for _, tc := range []struct {
		name         string
		holderFirst  bool // the holder connected before its waiters
		stuckHolder  bool // the holder does not read: the ERROR stays outbound
		failedWaiter bool // writing to the first waiter fails
	}{
		{"holder connected first", true, false, false},
		{"holder connected last", false, false, false},
		{"holder's output stuck", false, true, false},
		{"a waiter's write fails", false, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, Config{})
			const lock = "shutdown"
			acq := protocol.AppendAcquire(nil, farLeaseMS, lock)
			var h peer
			if tc.holderFirst {
				h, _ = r.claim(lock, farLeaseMS)
			}
			ws := make([]peer, 3)
			for i := range ws {
				ws[i] = r.peer()
			}
			if !tc.holderFirst {
				h, _ = r.claim(lock, farLeaseMS)
			}
			for _, w := range ws {
				r.send(w.fakeConn, acq)
				if tok := r.state(w); tok != 0 {
					t.Fatal("a waiter was granted")
				}
			}
			silent := r.peer()
			partial := r.peer()
			r.send(partial.fakeConn, acq[:4])
			h.stuck = tc.stuckHolder
			ws[0].failWrite = tc.failedWaiter
			all := append([]peer{h, silent, partial}, ws...)
			r.run(5 * ms)
			at := r.now()

			r.turnOf(r.o.shutdown)
			for _, p := range all {
				if p == ws[0] && tc.failedWaiter {
					r.quiet(p, "waiter whose write failed")
				} else {
					r.expectError(p, protocol.CodeShuttingDown)
				}
				r.expectClosed(p, ReleaseShutdown, at, at)
			}
			for _, w := range ws {
				if w.s.claim.State() == locktable.Holding {
					t.Fatalf("%v was promoted during shutdown", w)
				}
			}
			if r.o.sessions.len != 0 || r.o.wheel.Len() != 0 {
				t.Fatalf("%d sessions and %d timers after shutdown", r.o.sessions.len, r.o.wheel.Len())
			}
			r.run(time.Hour) // nothing is left to tick
			for _, p := range all {
				r.quiet(p, "closed session")
			}
			late := peer{fakeConn: &fakeConn{o: r.o, keep: true}}
			r.o.refuse(late.fakeConn)
			r.expectError(late, protocol.CodeShuttingDown)
		})
	}
}

// Rule 6: a step of the wall clock moves tokens and nothing else. Tokens
// still increase across a step back, and every lease still ends at
// lastSeen+lease on the monotonic clock.
func TestRuleWallClockStep(t *testing.T) {
	for _, step := range []time.Duration{-time.Hour, -24 * time.Hour, -time.Second, time.Hour} {
		t.Run(fmt.Sprintf("step %v", step), func(t *testing.T) {
			r := newRig(t, Config{})
			const lock = "wall"
			h, t1 := r.claim(lock, 100)
			w, _ := r.claim(lock, 100)
			x, _ := r.claim(lock, farLeaseMS)
			acquired := r.now()
			r.until(acquired + 10*ms)
			r.clk.wall = r.clk.wall.Add(step)
			r.until(acquired + 20*ms)
			r.send(w.fakeConn, heartbeat)
			if tok := r.state(w); tok != 0 {
				t.Fatal("the waiter was granted")
			}

			r.until(acquired + 100*ms)
			r.tick()
			r.expectOpen(h, "holder at lastSeen+lease")
			r.run(wheelTick)
			r.expectClosed(h, ReleaseExpired, acquired+100*ms+1, acquired+100*ms+wheelTick)
			t2 := r.expectPromoted(w, t1)

			r.until(acquired + 120*ms)
			r.tick()
			r.expectOpen(w, "promoted waiter at lastSeen+lease")
			r.run(wheelTick)
			r.expectClosed(w, ReleaseExpired, acquired+120*ms+1, acquired+120*ms+wheelTick)
			t3 := r.expectPromoted(x, t2)

			_, t4 := r.claim("wall, another lock", 100)
			if t4 <= t3 {
				t.Fatalf("a fresh grant's token %d after %d", t4, t3)
			}
		})
	}
}
