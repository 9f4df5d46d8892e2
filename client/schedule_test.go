package client

import (
	"math/rand/v2"
	"testing"
	"time"
)

const ms = time.Millisecond

func TestScheduleInterval(t *testing.T) {
	for _, tc := range []struct {
		name     string
		lease    time.Duration
		rtts     []time.Duration
		wantSRTT time.Duration
		want     time.Duration
	}{
		{"no sample yet is lease/4", 2 * time.Second, nil, 0, 500 * ms},
		{"first sample seeds the average", 2 * time.Second, []time.Duration{10 * ms}, 10 * ms, 480 * ms},
		{"alpha 0.2", 2 * time.Second, []time.Duration{10 * ms, 60 * ms}, 20 * ms, 460 * ms},
		{"alpha 0.2 downwards", 2 * time.Second, []time.Duration{60 * ms, 10 * ms}, 50 * ms, 400 * ms},
		{"zero RTT never exceeds lease/4", time.Second, []time.Duration{0, 0}, 0, 250 * ms},
		{"negative RTT counts as zero", time.Second, []time.Duration{-5 * ms}, 0, 250 * ms},
		{"slow link clamps to 100ms", 2 * time.Second, []time.Duration{300 * ms}, 300 * ms, 100 * ms},
		{"safeRTT equal to base clamps to floor", 2 * time.Second, []time.Duration{250 * ms}, 250 * ms, 100 * ms},
		{"short lease: floor is lease/4", 200 * ms, []time.Duration{ms}, ms, 50 * ms},
		{"short lease: slow link", 200 * ms, []time.Duration{40 * ms}, 40 * ms, 50 * ms},
		{"floor boundary: lease 400ms", 400 * ms, []time.Duration{10 * ms}, 10 * ms, 100 * ms},
		{"floor boundary: lease 800ms", 800 * ms, []time.Duration{10 * ms}, 10 * ms, 180 * ms},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newHeartbeatSchedule(tc.lease)
			for _, rtt := range tc.rtts {
				s.observe(rtt)
			}
			if got := s.smoothedRTT(); got != tc.wantSRTT {
				t.Errorf("smoothed RTT = %v, want %v", got, tc.wantSRTT)
			}
			if got := s.interval(); got != tc.want {
				t.Errorf("interval = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestScheduleBounds: whatever the RTTs, the interval stays within
// [min(100ms, lease/4), lease/4], and a larger smoothed RTT never lengthens it.
func TestScheduleBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		lease := time.Duration(1+rng.Int64N(int64(10*time.Second))) * time.Nanosecond
		lease = max(lease, time.Millisecond)
		s := newHeartbeatSchedule(lease)
		base, floor := lease/4, min(100*ms, lease/4)
		prevSRTT, prevInterval := s.smoothedRTT(), s.interval()
		for range 50 {
			s.observe(time.Duration(rng.Int64N(int64(lease))))
			got := s.interval()
			if got < floor || got > base {
				t.Fatalf("lease %v: interval %v outside [%v, %v]", lease, got, floor, base)
			}
			if s.smoothedRTT() > prevSRTT && got > prevInterval {
				t.Fatalf("lease %v: RTT rose %v→%v but interval grew %v→%v", lease, prevSRTT, s.smoothedRTT(), prevInterval, got)
			}
			prevSRTT, prevInterval = s.smoothedRTT(), got
		}
	}
}

func TestClientTimeoutIsFourFifthsOfTheLease(t *testing.T) {
	for lease, want := range map[time.Duration]time.Duration{
		500 * ms:        400 * ms,
		2 * time.Second: 1600 * ms,
		ms:              800 * time.Microsecond,
	} {
		if got := clientTimeout(lease); got != want {
			t.Errorf("clientTimeout(%v) = %v, want %v", lease, got, want)
		}
	}
}
