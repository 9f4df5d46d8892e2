package scenario

import (
	"slices"
	"time"
)

// sizes are the knobs of one run: -quick picks the small set.
type sizes struct {
	dur, warm time.Duration // S0, S1, S2: measured time after a warm-up
	workers   int           // S0 and S1 concurrency (C)
	waiters   int           // S2 waiters on the one lock (N)
	holdLease time.Duration // lease of S1/S2 sessions (no heartbeat is due in a cycle)

	s3Sessions []int // session counts (both servers at each); the 10,000 case first
	s3Floor    int   // sessions against the bare gnet server (the CPU comparison)
	s3Pairs    int   // alternating bare gnet / monolock runs at s3Floor sessions
	s3Lease    time.Duration
	s3Warm     time.Duration // after every session answered, before the window
	s3Window   time.Duration

	s4Leases []time.Duration
	s4Reps   int

	s5Queues []int
	s5Reps   int

	s6Sessions int // sessions per S6 server (plain, TLS, mTLS)
	s6Runs     int // alternating runs of the three
	s6Lease    time.Duration
	s6Warm     time.Duration
	s6Window   time.Duration

	s7Sessions int // S7 heartbeat sessions (lease, warm and window of S3)
	s7Runs     int // alternating runs of the three server configurations

	s8Rounds int // alternating rounds of S8's two variants
	s8Txns   int // transactions per variant and round

	s9Dur     time.Duration // each S9 loop's length
	s9Workers int           // S9's concurrent lock cycles
	s9Trials  int           // S9's loss-case rounds per way of closing
}

// coreSessions is the session count of the core-server figures.
const coreSessions = 10_000

func fullSizes(maxSessions int) sizes {
	return sizes{
		dur: 5 * time.Second, warm: time.Second, workers: 32, waiters: 32, holdLease: 30 * time.Second,
		s3Sessions: capSessions([]int{coreSessions, maxSessions}, maxSessions),
		s3Floor:    min(coreSessions, maxSessions), s3Pairs: 3,
		s3Lease: 2 * time.Second, s3Warm: 2 * time.Second, s3Window: 5 * time.Second,
		s4Leases: []time.Duration{250 * time.Millisecond, time.Second, 2 * time.Second},
		s4Reps:   5,
		s5Queues: capSessions([]int{1_000, 2_000, 4_000, 8_000, 16_000, maxSessions}, maxSessions),
		s5Reps:   3,

		s6Sessions: min(2_000, maxSessions), s6Runs: 3,
		s6Lease: 2 * time.Second, s6Warm: 2 * time.Second, s6Window: 5 * time.Second,
		s7Sessions: min(coreSessions, maxSessions), s7Runs: 3,
		s8Rounds: 10, s8Txns: 500,
		s9Dur: 100 * time.Second, s9Workers: 32, s9Trials: 3,
	}
}

func quickSizes(maxSessions int) sizes {
	return sizes{
		dur: 700 * time.Millisecond, warm: 200 * time.Millisecond, workers: 16, waiters: 16, holdLease: 30 * time.Second,
		s3Sessions: capSessions([]int{1_000}, maxSessions),
		s3Floor:    min(1_000, maxSessions), s3Pairs: 1,
		s3Lease: time.Second, s3Warm: 300 * time.Millisecond, s3Window: time.Second,
		s4Leases: []time.Duration{time.Second},
		s4Reps:   2,
		s5Queues: capSessions([]int{250, 500, 1_000}, maxSessions),
		s5Reps:   1,

		s6Sessions: min(200, maxSessions), s6Runs: 1,
		s6Lease: 2 * time.Second, s6Warm: 600 * time.Millisecond, s6Window: time.Second,
		s7Sessions: min(1_000, maxSessions), s7Runs: 1,
		s8Rounds: 4, s8Txns: 100,
		s9Dur: 3 * time.Second, s9Workers: 32, s9Trials: 1,
	}
}

// capSessions drops counts above the limit, keeps the limit itself when it
// was asked for, removes duplicates and sorts (an even count: half holders).
func capSessions(ns []int, limit int) []int {
	var out []int
	for _, n := range ns {
		n = min(n, limit) &^ 1
		if n > 0 && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}
