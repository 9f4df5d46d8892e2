package io.github.monolock.shedlock;

import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;

/**
 * When the provider closes connections: at lockAtMostFor, and at the end of
 * lockAtLeastFor after an early unlock. The tests drive a fake one with
 * their own clock.
 */
interface Timers extends AutoCloseable {
    /** Longer delays wait this long (about 290 years fit in a long of nanoseconds). */
    Duration LONGEST = Duration.ofDays(365L * 200);

    /**
     * Runs task at the instant (at once when it has passed).
     *
     * @return what cancels it
     */
    Runnable schedule(Instant at, Runnable task);

    /** Stops the timers; tasks not yet run never run. */
    @Override
    void close();

    /** One daemon thread for all of a provider's timers, on the given clock. */
    static Timers onThread(Clock clock) {
        ScheduledThreadPoolExecutor executor = new ScheduledThreadPoolExecutor(1, r -> {
            Thread t = new Thread(r, "monolock-shedlock-timer");
            t.setDaemon(true);
            return t;
        });
        executor.setRemoveOnCancelPolicy(true);
        executor.setExecuteExistingDelayedTasksAfterShutdownPolicy(false);
        return new Timers() {
            @Override
            public Runnable schedule(Instant at, Runnable task) {
                Duration d = Duration.between(clock.instant(), at);
                long delay = d.isNegative() ? 0 : d.compareTo(LONGEST) > 0 ? LONGEST.toNanos() : d.toNanos();
                ScheduledFuture<?> f = executor.schedule(task, delay, TimeUnit.NANOSECONDS);
                return () -> f.cancel(false);
            }

            @Override
            public void close() {
                executor.shutdownNow();
            }
        };
    }
}
