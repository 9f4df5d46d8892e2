package io.github.monolock;

import java.util.function.LongUnaryOperator;

/**
 * The waits of {@link MonolockClient#run} between attempts: exponential from
 * 100 ms doubling up to 5 s, each wait uniform in [step/2, step] (equal
 * jitter: clients that failed together do not retry together, and no wait
 * drops to zero); and after "server shutting down" (0x01) a wait uniform in
 * [0, min(1 s, lease/4)] instead, so that a fleet told in the same
 * millisecond does not reach the restarted server or the standby at once.
 */
final class Backoff {
    static final long MIN_NANOS = 100_000_000L;
    static final long MAX_NANOS = 5_000_000_000L;
    static final long MAX_SHUTDOWN_JITTER_NANOS = 1_000_000_000L;

    /** Returns a uniform value in [0, n); a parameter for the tests. */
    private final LongUnaryOperator randN;
    private long step;

    Backoff(LongUnaryOperator randN) {
        this.randN = randN;
    }

    long next() {
        if (step == 0) step = MIN_NANOS;
        long s = step;
        step = Math.min(2 * s, MAX_NANOS);
        long half = s / 2;
        return half + randN.applyAsLong(s - half + 1);
    }

    long shutdownJitter(long leaseMs) {
        long limit = Math.min(MAX_SHUTDOWN_JITTER_NANOS, leaseMs * 250_000L);
        return limit <= 0 ? 0 : randN.applyAsLong(limit + 1);
    }
}
