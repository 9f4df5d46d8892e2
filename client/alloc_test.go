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

// TestHeartbeatCycleDoesNotAllocate: a heartbeat's send, its reply's decoding
// and its acknowledgement allocate nothing, so a long hold creates no garbage.
func TestHeartbeatCycleDoesNotAllocate(t *testing.T) {
	s := newSession(&Lock{start: time.Now()}, writeOnlyConn{}, nil, "x", time.Hour, 3_600_000, nil)
	s.deadline = time.Now().Add(time.Hour)
	s.lossTimer, s.hbTimer = time.NewTimer(time.Hour), time.NewTimer(time.Hour)
	defer s.lossTimer.Stop()
	defer s.hbTimer.Stop()
	s.state, s.token = stateHeld, 7

	replies := bufio.NewReaderSize(repeatReader(protocol.AppendAcquired(nil, 7)), readBufferSize)
	var buf protocol.FrameBuffer
	var f protocol.Frame
	allocs := testing.AllocsPerRun(1000, func() {
		if err := s.sendHeartbeat(); err != nil {
			t.Fatal(err)
		}
		if err := protocol.ReadServerFrame(replies, &buf, &f); err != nil {
			t.Fatal(err)
		}
		if err := s.receive(inbound{typ: f.Type, token: f.Token, at: time.Now()}); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per heartbeat", allocs)
	}
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
