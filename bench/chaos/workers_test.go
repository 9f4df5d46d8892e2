package main

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/monolock/monolock/client"
	"github.com/monolock/monolock/protocol"
)

func TestLogUniform(t *testing.T) {
	lo, hi := 40*time.Millisecond, 3*time.Second
	short := 0
	for i := 0; i < 2000; i++ {
		d := logUniform(lo, hi)
		if d < lo || d > hi {
			t.Fatalf("logUniform = %v, outside [%v, %v]", d, lo, hi)
		}
		if d < 350*time.Millisecond { // the lower half in log scale
			short++
		}
	}
	if short < 800 || short > 1200 {
		t.Fatalf("%d of 2000 below the log-midpoint, want about half", short)
	}
	if d := logUniform(hi, lo); d != hi {
		t.Fatalf("logUniform(hi, lo) = %v", d)
	}
}

func TestWaitGate(t *testing.T) {
	// Expiry before fn starts cancels the wait, and fn must not work.
	g := newWaitGate(context.Background(), time.Millisecond)
	<-g.ctx.Done()
	if g.begin() || g.began() {
		t.Fatal("begin succeeded after the wait expired")
	}
	g.close()

	// Once fn started, neither the wait bound nor stop cancels the context.
	stop, cancel := context.WithCancel(context.Background())
	g = newWaitGate(stop, 5*time.Millisecond)
	if !g.begin() {
		t.Fatal("begin failed")
	}
	cancel()
	time.Sleep(20 * time.Millisecond)
	if g.ctx.Err() != nil {
		t.Fatal("the gate cancelled a running fn's context")
	}
	g.close()
	if g.ctx.Err() == nil {
		t.Fatal("close left the context alive")
	}
}

func TestLossName(t *testing.T) {
	cases := map[error]string{
		fmt.Errorf("x: %w", client.ErrHeartbeatTimeout):      "heartbeat timeout",
		fmt.Errorf("x: %w", client.ErrConnectionClosed):      "connection lost",
		client.ErrProtocolViolation:                          "protocol violation",
		&client.ServerError{Code: protocol.CodeShuttingDown}: "ERROR 0x01 (" + protocol.CodeShuttingDown.String() + ")",
		client.ErrReleased:                                   "",
		context.Canceled:                                     "",
		errors.New("something"):                              "",
	}
	for err, want := range cases {
		if got := lossName(err); got != want {
			t.Errorf("lossName(%v) = %q, want %q", err, got, want)
		}
	}
}

func TestRecorder(t *testing.T) {
	r := newRecorder()
	gr := r.begin(3, "L", 42, time.Second, "do")
	r.lost(gr, client.ErrReleased) // a release is not a loss
	r.ended(gr, time.Time{})
	gr2 := r.begin(4, "L", 43, time.Second, "handle")
	r.lost(gr2, fmt.Errorf("%w: eof", client.ErrConnectionClosed))
	r.lost(gr2, client.ErrHeartbeatTimeout)   // the first loss counts
	r.ended(gr2, time.Now().Add(time.Second)) // the deadline of the last answer, after the loss
	gs := r.snapshot()
	if len(gs) != 2 || r.n() != 2 {
		t.Fatalf("%d grants", len(gs))
	}
	if !gs[0].LostAt.IsZero() || gs[0].EndedAt.IsZero() || gs[0].ID == gs[1].ID {
		t.Fatalf("first grant %+v", gs[0])
	}
	if gs[1].LossCause != "connection lost" || gs[1].LostAt.IsZero() || !gs[1].GaveUpAt().Equal(gs[1].LostAt) {
		t.Fatalf("second grant %+v", gs[1])
	}
	if c := r.causeCounts(); c["lost while holding: connection lost"] != 1 || c["lost while holding: heartbeat timeout"] != 1 {
		t.Fatalf("causes %v", c)
	}
}
