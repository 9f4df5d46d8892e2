package main

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/monolock/monolock/client"
	"github.com/monolock/monolock/protocol"
)

// TestKillDelay: the time between SIGTERM and SIGKILL after a loss, on an
// injected clock. When the server let go (ERROR 0x01, 0x02) it is
// min(0.1 × lease, releasedGrace) whatever the give-up deadline; otherwise
// half-way between the give-up deadline and the server's expiry, at most
// stopGrace.
func TestKillDelay(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	forced := fmt.Errorf("lock lost: %w", &client.ServerError{Code: protocol.CodeClosedByAdmin})
	shutdown := &client.ServerError{Code: protocol.CodeShuttingDown}
	timeout := fmt.Errorf("x: %w", client.ErrHeartbeatTimeout)
	closed := client.ErrConnectionClosed
	cases := []struct {
		name       string
		cause      error
		lease      time.Duration
		validUntil time.Time
		want       time.Duration
	}{
		{"force release, default lease", forced, 2 * time.Second, now.Add(time.Second), 200 * time.Millisecond},
		{"force release, long lease: releasedGrace", forced, time.Minute, now.Add(40 * time.Second), releasedGrace},
		{"force release, lease 2.5 s: exactly releasedGrace", forced, 2500 * time.Millisecond, now.Add(time.Second), releasedGrace},
		{"force release, lease 2.5 s - 10 ns", forced, 2500*time.Millisecond - 10, now.Add(time.Second), releasedGrace - 1},
		{"shutdown", shutdown, time.Minute, now.Add(40 * time.Second), releasedGrace},
		{"heartbeat timeout: half-way to the expiry", timeout, 2 * time.Second, now, 200 * time.Millisecond},
		{"heartbeat timeout, long lease: stopGrace", timeout, time.Minute, now, stopGrace},
		{"connection lost before the deadline", closed, 2 * time.Second, now.Add(time.Second), 1200 * time.Millisecond},
		{"noticed past the kill moment: at once", timeout, 2 * time.Second, now.Add(-300 * time.Millisecond), -100 * time.Millisecond},
		{"a client error is no release", &client.ServerError{Code: protocol.CodeNotAuthorized}, time.Minute, now, stopGrace},
	}
	for _, c := range cases {
		if got := killDelay(c.cause, c.lease, c.validUntil, now); got != c.want {
			t.Errorf("%s: killDelay = %v, want %v", c.name, got, c.want)
		}
	}
	if !serverLetGo(forced) || !serverLetGo(shutdown) || serverLetGo(timeout) || serverLetGo(closed) || serverLetGo(errors.New("other")) {
		t.Error("serverLetGo misclassifies")
	}
}
