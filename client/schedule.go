package client

import "time"

// Constants of the heartbeat rules (client rule 3). The server drops a session
// whose last frame is older than the lease; the client gives up earlier so it
// stops working before the server could hand the lock to someone else.
const (
	// maxHeartbeatFloor caps the shortest interval, so a slow link does not turn
	// heartbeats into a flood.
	maxHeartbeatFloor = 100 * time.Millisecond
	// rttWeight is 1/alpha of the RTT average (alpha = 0.2).
	rttWeight = 5
)

// clientTimeout is 0.8 × lease: how long the client goes without an
// acknowledgement before it treats the lock as lost.
func clientTimeout(lease time.Duration) time.Duration { return lease * 4 / 5 }

// DefaultConnectTimeout bounds a connection's TCP connect and TLS handshake
// when Config.ConnectTimeout is not set: the same 10 s as the Python,
// Node.js, Rust and Java clients.
const DefaultConnectTimeout = 10 * time.Second

// connectTimeout is the bound on a connection's connect and handshake for
// the configured value: zero or negative is the default.
func connectTimeout(configured time.Duration) time.Duration {
	if configured <= 0 {
		return DefaultConnectTimeout
	}
	return configured
}

// heartbeatSchedule computes the heartbeat interval from the lease and the
// measured round-trip times. It is pure (no clock, no I/O) so the rule can be
// tested on its own.
type heartbeatSchedule struct {
	base    time.Duration // lease / 4, the longest interval
	floor   time.Duration // min(100ms, base), the shortest interval
	srtt    time.Duration // smoothed RTT, EWMA with alpha 0.2
	sampled bool          // srtt holds at least one sample
}

func newHeartbeatSchedule(lease time.Duration) heartbeatSchedule {
	base := lease / 4
	return heartbeatSchedule{base: base, floor: min(maxHeartbeatFloor, base)}
}

// observe feeds one measured round-trip time. The first sample seeds the
// average, as in TCP's SRTT, so a slow link shortens the interval at once.
func (s *heartbeatSchedule) observe(rtt time.Duration) {
	rtt = max(rtt, 0)
	if !s.sampled {
		s.srtt, s.sampled = rtt, true
		return
	}
	s.srtt += (rtt - s.srtt) / rttWeight
}

// interval is the time between two heartbeat sends: base − 2 × smoothed RTT,
// clamped to [floor, base]. RTT only ever shortens it. When the previous reply
// comes later than this, the next heartbeat goes out right after that reply.
func (s *heartbeatSchedule) interval() time.Duration {
	return min(max(s.base-2*s.srtt, s.floor), s.base)
}

// smoothedRTT is the current average, for observers.
func (s *heartbeatSchedule) smoothedRTT() time.Duration { return s.srtt }
