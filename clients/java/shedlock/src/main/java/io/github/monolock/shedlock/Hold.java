package io.github.monolock.shedlock;

import io.github.monolock.FencingToken;
import java.time.Clock;
import java.time.Instant;
import java.util.function.Consumer;

/**
 * The one connection behind a lock and its extensions, and the instant it is
 * closed: lockAtMostUntil while the task runs, lockAtLeastUntil after an
 * early unlock. Every timer carries the deadline it was set for, so a timer
 * that an extension replaced does nothing even if its cancel came too late.
 */
final class Hold {
    private final Locks.Held held;
    private final Clock clock;
    private final Timers timers;
    private final Consumer<Hold> whenClosed;
    private Instant deadline;
    private Runnable cancelTimer = () -> { };
    private boolean closing;
    private boolean unlocked;

    Hold(Locks.Held held, Clock clock, Timers timers, Consumer<Hold> whenClosed) {
        this.held = held;
        this.clock = clock;
        this.timers = timers;
        this.whenClosed = whenClosed;
    }

    FencingToken token() {
        return held.token();
    }

    /** Not closed (or closing) by the provider, and ownership confirmed now. */
    synchronized boolean isValid() {
        return !closing && held.isValid();
    }

    /** Whether unlock has been called on this lock or its last extension. */
    synchronized boolean isUnlocked() {
        return unlocked;
    }

    /** lockAtMostFor: close at lockAtMostUntil, at once when it has passed already. */
    synchronized void closeAt(Instant at) {
        deadline = at;
        cancelTimer.run();
        cancelTimer = timers.schedule(at, () -> due(at));
    }

    private void due(Instant at) {
        synchronized (this) {
            if (closing || !at.equals(deadline)) return;
        }
        close();
    }

    /**
     * The task is done: keep the lock until lockAtLeastUntil, then close; close
     * at once when that has passed or the lock is no longer valid.
     */
    void unlock(Instant lockAtLeastUntil) {
        synchronized (this) {
            unlocked = true;
            if (!closing && held.isValid() && lockAtLeastUntil.isAfter(clock.instant())) {
                closeAt(lockAtLeastUntil);
                return;
            }
        }
        close();
    }

    /**
     * Moves lockAtMostUntil, if the lock is still valid: not closed, its
     * lockAtMostUntil not passed, ownership confirmed. Otherwise closes it.
     *
     * @return whether it was extended
     */
    boolean extend(Instant lockAtMostUntil) {
        synchronized (this) {
            if (!closing && held.isValid() && clock.instant().isBefore(deadline)) {
                closeAt(lockAtMostUntil);
                return true;
            }
        }
        close();
        return false;
    }

    /** Releases the lock; returns once the connection is closed. Idempotent. */
    void close() {
        synchronized (this) {
            closing = true;
            cancelTimer.run();
        }
        held.close();
        whenClosed.accept(this);
    }
}
