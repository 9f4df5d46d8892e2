package releaseloop

import (
	"net"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/monolock/monolock/client"
	"github.com/monolock/monolock/eventloop"
	"github.com/monolock/monolock/internal/testsupport/inproc"
)

// S9's loop, short, over loopback against an in-process server: with
// RELEASE no cycle fails and no TIME_WAIT entry is left towards the server;
// with the client's FIN first one is left per cycle (the counter sees them).
func TestReleaseLoopLeavesNoTimeWait(t *testing.T) {
	srv := inproc.Start(t, eventloop.Config{ListenAddress: "127.0.0.1:0", Logger: zerolog.Nop()})
	addr := srv.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	for _, tc := range []struct {
		name   string
		dialer client.Dialer
		left   bool
	}{
		{"release", &net.Dialer{}, false},
		{"fin", oldCloseDialer{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := timeWaitTowards(port, nil)
			c := client.New(client.Config{Address: addr, Dialer: tc.dialer})
			res := cycleLoop(c, 2, 300*time.Millisecond, 2*time.Second)
			if res.Cycles == 0 || res.ConnectFailures+res.OtherFailures > 0 {
				t.Fatalf("%d cycles, %d connect failures, %d other (first: %s)", res.Cycles, res.ConnectFailures, res.OtherFailures, res.FirstFailure)
			}
			left := len(timeWaitTowards(port, before))
			if tc.left && left == 0 {
				t.Errorf("%d FIN-first cycles left no TIME_WAIT entry", res.Cycles)
			}
			if !tc.left && left != 0 {
				t.Errorf("%d cycles with RELEASE left %d TIME_WAIT entries, want 0", res.Cycles, left)
			}
		})
	}
}
