package io.github.monolock;

/**
 * The heartbeat schedule of client rule 3 (docs/protocol.md), in nanoseconds:
 * {@code clamp(lease/4 − 2 × smoothedRTT, min(100 ms, lease/4), lease/4)},
 * the RTT an EWMA with α = 0.2 whose first sample seeds it, kept in whole
 * nanoseconds (each step moves it by a fifth of the difference, rounded
 * toward zero) so that every client computes the same interval. Pure: no
 * clock.
 */
final class HeartbeatSchedule {
    static final long MAX_FLOOR_NANOS = 100_000_000L;
    /** 1/α of the RTT average. */
    private static final long RTT_WEIGHT = 5;

    final long baseNanos;
    final long floorNanos;
    private long srttNanos;
    private boolean sampled;

    /** @param leaseNanos the lease as asked, at least 1 ms */
    HeartbeatSchedule(long leaseNanos) {
        baseNanos = leaseNanos / 4;
        floorNanos = Math.min(MAX_FLOOR_NANOS, baseNanos);
    }

    /** Feeds one round-trip time; the first sample seeds the average, as TCP's SRTT does. */
    void observe(long rttNanos) {
        long rtt = Math.max(rttNanos, 0);
        if (!sampled) {
            srttNanos = rtt;
            sampled = true;
            return;
        }
        srttNanos += (rtt - srttNanos) / RTT_WEIGHT;
    }

    long smoothedRttNanos() {
        return srttNanos;
    }

    /** Time from one heartbeat send to the next; the RTT only ever shortens it. */
    long intervalNanos() {
        return Math.min(Math.max(baseNanos - 2 * srttNanos, floorNanos), baseNanos);
    }
}
