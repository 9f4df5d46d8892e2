package client

import "time"

// The retry delays of DoRetry: exponential from minBackoff, capped at maxBackoff.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// maxShutdownJitter caps the random wait before reconnecting after ERROR
// 0x01 (see shutdownJitter).
const maxShutdownJitter = time.Second

// shutdownJitter is the wait before reconnecting after ERROR 0x01: uniform in
// [0, min(maxShutdownJitter, lease/4)]. randN is as for backoff.next.
func shutdownJitter(lease time.Duration, randN func(n int64) int64) time.Duration {
	limit := min(maxShutdownJitter, lease/4)
	if limit <= 0 {
		return 0
	}
	return time.Duration(randN(int64(limit) + 1))
}

// backoff yields DoRetry's waits. Each wait is uniform in [step/2, step] (equal
// jitter: clients that failed together do not retry together, and no wait drops
// to zero); the step doubles from minBackoff up to maxBackoff.
type backoff struct {
	step time.Duration
}

// next returns the wait before the next attempt. randN returns a uniform value
// in [0, n), like math/rand/v2's Int64N; it is a parameter for tests.
func (b *backoff) next(randN func(n int64) int64) time.Duration {
	if b.step == 0 {
		b.step = minBackoff
	}
	step := b.step
	b.step = min(2*step, maxBackoff)
	half := step / 2
	return half + time.Duration(randN(int64(step-half)+1))
}
