package io.github.monolock;

/**
 * The heartbeat schedule of client rule 3 (docs/protocol.md), in nanoseconds:
 * {@code clamp(lease/4 − 2 × smoothedRTT, min(100 ms, lease/4), lease/4)},
 * the RTT an EWMA with α = 0.2 whose first sample seeds it. Pure: no clock.
 */
final class HeartbeatSchedule {
    static final long MAX_FLOOR_NANOS = 100_000_000L;
    private static final double ALPHA = 0.2;

    final long baseNanos;
    final long floorNanos;
    private double srttNanos;
    private boolean sampled;

    HeartbeatSchedule(long leaseMs) {
        baseNanos = leaseMs * 250_000L; // lease/4, exact for every u32 lease
        floorNanos = Math.min(MAX_FLOOR_NANOS, baseNanos);
    }

    /** Feeds one round-trip time; the first sample seeds the average, as TCP's SRTT does. */
    void observe(long rttNanos) {
        double rtt = Math.max(rttNanos, 0);
        if (!sampled) {
            srttNanos = rtt;
            sampled = true;
            return;
        }
        srttNanos += ALPHA * (rtt - srttNanos);
    }

    double smoothedRttNanos() {
        return srttNanos;
    }

    /** Time from one heartbeat send to the next; the RTT only ever shortens it. */
    long intervalNanos() {
        double v = baseNanos - 2 * srttNanos;
        if (v <= floorNanos) return floorNanos;
        if (v >= baseNanos) return baseNanos;
        return (long) v;
    }
}
