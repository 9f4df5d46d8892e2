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

    /** What {@link MonolockClient#run} does after an attempt failed before the grant. */
    enum Retry {
        /** Report it: a new attempt meets the same answer (busy, a client error, a protocol violation, TLS refused). */
        NO,
        /** Retry after {@link #next}. */
        BACKOFF,
        /** Retry after {@link #shutdownJitter}: the server said it is shutting down (0x01). */
        SHUTDOWN_WAIT
    }

    /** Returns a uniform value in [0, n); a parameter for the tests. */
    private final LongUnaryOperator randN;
    private long step;

    Backoff(LongUnaryOperator randN) {
        this.randN = randN;
    }

    /** The retry rule of docs/protocol.md for a failed attempt, by the exception the caller gets. */
    static Retry after(Throwable failure) {
        if (!(failure instanceof ServerUnavailableException)) return Retry.NO;
        ServerUnavailableException e = (ServerUnavailableException) failure;
        if (!e.isRetriable()) return Retry.NO;
        return e.code().orElse(-1) == Wire.CODE_SHUTTING_DOWN ? Retry.SHUTDOWN_WAIT : Retry.BACKOFF;
    }

    long next() {
        if (step == 0) step = MIN_NANOS;
        long s = step;
        step = Math.min(2 * s, MAX_NANOS);
        long half = s / 2;
        return half + randN.applyAsLong(s - half + 1);
    }

    /** The wait after 0x01: uniform in [0, {@link #shutdownJitterMax}]. */
    long shutdownJitter(long leaseNanos) {
        long limit = shutdownJitterMax(leaseNanos);
        return limit <= 0 ? 0 : randN.applyAsLong(limit + 1);
    }

    /** min(1 s, lease/4), the lease as asked, to the nanosecond. */
    static long shutdownJitterMax(long leaseNanos) {
        return Math.min(MAX_SHUTDOWN_JITTER_NANOS, leaseNanos / 4);
    }
}
