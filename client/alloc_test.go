package client

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/monolock/monolock/protocol"
)

// writeOnlyConn accepts writes and deadlines; nothing else is called.
type writeOnlyConn struct{ net.Conn }

func (writeOnlyConn) Write(b []byte) (int, error)      { return len(b), nil }
func (writeOnlyConn) SetWriteDeadline(time.Time) error { return nil }

// TestHeartbeatCycleDoesNotAllocate: a heartbeat's step and send, its reply's
// decoding and its acknowledgement allocate nothing, so a long hold creates no
// garbage.
func TestHeartbeatCycleDoesNotAllocate(t *testing.T) {
	s, replies := heldSession()
	defer s.timer.Stop()
	var at time.Time
	var buf protocol.FrameBuffer
	var f protocol.Frame
	allocs := testing.AllocsPerRun(1000, func() {
		at = s.m.heartbeatDue
		if s.apply(s.m.step(event{kind: evTimer, at: at})) || s.m.heartbeats == 0 {
			t.Fatal("no heartbeat at its time")
		}
		if err := protocol.ReadServerFrame(replies, &buf, &f); err != nil {
			t.Fatal(err)
		}
		if s.apply(s.m.step(event{kind: evFrame, at: at.Add(time.Millisecond), typ: f.Type, token: f.Token})) {
			t.Fatal("the answer ended the session")
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per heartbeat", allocs)
	}
}

// heldSession is a session holding its lock with token 7, a heartbeat due
// now and the deadline an hour away, over a connection that swallows what
// it sends, and the server's answers to read: ACQUIRED with that token, over
// and over.
func heldSession() (*session, *bufio.Reader) {
	s := newSession(&Lock{start: time.Now()}, writeOnlyConn{}, nil, "x", time.Hour, 3_600_000, nil)
	s.timer = time.NewTimer(time.Hour)
	at := time.Now()
	s.m.state, s.m.token = stateHeld, 7
	s.m.deadline, s.m.heartbeatDue = at.Add(time.Hour), at
	return s, bufio.NewReaderSize(repeatReader(protocol.AppendAcquired(nil, 7)), readBufferSize)
}

// repeatReader yields frame over and over.
type repeatReader []byte

func (r repeatReader) Read(p []byte) (int, error) {
	n := 0
	for n+len(r) <= len(p) {
		n += copy(p[n:], r)
	}
	return n, nil
}

// TestValidDoesNotAllocate: Valid is meant to be called before every side
// effect.
func TestValidDoesNotAllocate(t *testing.T) {
	l := &Lock{start: time.Now()}
	l.setValidUntil(time.Now().Add(time.Hour))
	if allocs := testing.AllocsPerRun(1000, func() {
		if !l.Valid() {
			t.Fatal("not valid")
		}
	}); allocs != 0 {
		t.Fatalf("%v allocations per Valid", allocs)
	}
}

// BenchmarkHeartbeatCycle measures one heartbeat's step and send, its
// reply's decoding and its acknowledgement (run with -benchmem: 0 allocs/op).
func BenchmarkHeartbeatCycle(b *testing.B) {
	s, replies := heldSession()
	defer s.timer.Stop()
	var at time.Time
	var buf protocol.FrameBuffer
	var f protocol.Frame
	b.ReportAllocs()
	for b.Loop() {
		at = s.m.heartbeatDue
		s.m.deadline = at.Add(time.Hour)
		if s.apply(s.m.step(event{kind: evTimer, at: at})) {
			b.Fatal("the heartbeat ended the session")
		}
		if err := protocol.ReadServerFrame(replies, &buf, &f); err != nil {
			b.Fatal(err)
		}
		if s.apply(s.m.step(event{kind: evFrame, at: at.Add(time.Millisecond), typ: f.Type, token: f.Token})) {
			b.Fatal("the answer ended the session")
		}
	}
}
