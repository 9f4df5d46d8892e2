package io.github.monolock.shedlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.monolock.FencingToken;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicReference;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.SimpleLock;
import net.javacrumbs.shedlock.support.LockException;
import org.junit.jupiter.api.Test;

/**
 * The provider's timers as rules, with a clock and timers of the test's own
 * and fake connections: when each connection closes, to the nanosecond.
 */
class MonolockLockProviderRulesTest {
    private static final Instant T0 = Instant.parse("2026-12-01T00:00:00Z");

    /** A clock the test moves. */
    static final class FakeClock extends Clock {
        Instant now = T0;

        @Override
        public Instant instant() {
            return now;
        }

        @Override
        public ZoneOffset getZone() {
            return ZoneOffset.UTC;
        }

        @Override
        public Clock withZone(java.time.ZoneId zone) {
            throw new UnsupportedOperationException();
        }
    }

    /** Timers that run when the test moves the clock past them. */
    static final class FakeTimers implements Timers {
        final FakeClock clock;
        final List<Object[]> pending = new ArrayList<>();
        boolean closed;

        FakeTimers(FakeClock clock) {
            this.clock = clock;
        }

        @Override
        public Runnable schedule(Instant at, Runnable task) {
            Object[] t = {at, task};
            pending.add(t);
            return () -> pending.remove(t);
        }

        /** Moves the clock to the instant, running each timer due on the way at its own instant. */
        void advanceTo(Instant to) {
            while (true) {
                Object[] next = null;
                for (Object[] t : pending) {
                    if (!((Instant) t[0]).isAfter(to) && (next == null || ((Instant) t[0]).isBefore((Instant) next[0]))) next = t;
                }
                if (next == null) break;
                pending.remove(next);
                if (((Instant) next[0]).isAfter(clock.now)) clock.now = (Instant) next[0];
                ((Runnable) next[1]).run();
            }
            clock.now = to;
        }

        @Override
        public void close() {
            closed = true;
            pending.clear();
        }
    }

    /** Connections that are held until closed; one holder per name. */
    static final class FakeLocks implements Locks {
        final Map<String, FakeHeld> holders = new HashMap<>();
        long tokens;

        @Override
        public Optional<Held> tryLock(String name, Duration lease) {
            FakeHeld h = holders.get(name);
            if (h != null && !h.closed) return Optional.empty();
            h = new FakeHeld(FencingToken.ofBits(++tokens));
            holders.put(name, h);
            return Optional.of(h);
        }

        boolean held(String name) {
            FakeHeld h = holders.get(name);
            return h != null && !h.closed;
        }
    }

    static final class FakeHeld implements Locks.Held {
        final FencingToken token;
        boolean closed;
        boolean lost;

        FakeHeld(FencingToken token) {
            this.token = token;
        }

        @Override
        public FencingToken token() {
            return token;
        }

        @Override
        public boolean isValid() {
            return !closed && !lost;
        }

        @Override
        public void close() {
            closed = true;
        }
    }

    final FakeClock clock = new FakeClock();
    final FakeTimers timers = new FakeTimers(clock);
    final FakeLocks locks = new FakeLocks();
    final MonolockLockProvider provider = new MonolockLockProvider(locks, Duration.ofSeconds(10), clock, timers);

    static LockConfiguration config(Instant createdAt, Duration atMost, Duration atLeast) {
        return new LockConfiguration(createdAt, "job", atMost, atLeast);
    }

    MonolockSimpleLock lock(Duration atMost, Duration atLeast) {
        return (MonolockSimpleLock) provider.lock(config(clock.now, atMost, atLeast)).orElseThrow();
    }

    static final Duration NS = Duration.ofNanos(1);

    @Test
    void lockAtMostForClosesTheConnectionWhenItElapsesWhileTheTaskRuns() {
        MonolockSimpleLock lock = lock(Duration.ofMinutes(5), Duration.ZERO);
        timers.advanceTo(T0.plus(Duration.ofMinutes(5)).minus(NS));
        assertTrue(locks.held("job"));
        assertTrue(lock.isValid());
        timers.advanceTo(T0.plus(Duration.ofMinutes(5)));
        assertFalse(locks.held("job"), "closed at createdAt + lockAtMostFor, the task not yet done");
        assertFalse(lock.isValid());
        lock.unlock(); // the task ends later: closing again is harmless (Lease.close is idempotent)
        assertFalse(locks.held("job"));
        assertTrue(timers.pending.isEmpty(), "no timer left behind");
    }

    @Test
    void unlockBeforeLockAtLeastForKeepsTheConnectionUntilThenAndTheLockIsBusy() {
        SimpleLock lock = lock(Duration.ofMinutes(5), Duration.ofSeconds(30));
        timers.advanceTo(T0.plusSeconds(1));
        lock.unlock();
        assertTrue(locks.held("job"));
        assertTrue(provider.lock(config(clock.now, Duration.ofMinutes(5), Duration.ZERO)).isEmpty(), "still held for lockAtLeastFor");
        timers.advanceTo(T0.plusSeconds(30).minus(NS));
        assertTrue(locks.held("job"));
        timers.advanceTo(T0.plusSeconds(30));
        assertFalse(locks.held("job"), "closed at createdAt + lockAtLeastFor");
        assertTrue(provider.lock(config(clock.now, Duration.ofMinutes(5), Duration.ZERO)).isPresent());
    }

    @Test
    void unlockAfterLockAtLeastForClosesAtOnce() {
        SimpleLock lock = lock(Duration.ofMinutes(5), Duration.ofSeconds(30));
        timers.advanceTo(T0.plusSeconds(30));
        lock.unlock();
        assertFalse(locks.held("job"));
        assertTrue(timers.pending.isEmpty(), "no timer left behind");
    }

    @Test
    void extendMovesBothBounds() {
        MonolockSimpleLock lock = lock(Duration.ofSeconds(10), Duration.ZERO);
        timers.advanceTo(T0.plusSeconds(5));
        MonolockSimpleLock extended = (MonolockSimpleLock) lock.doExtend(config(clock.now, Duration.ofSeconds(10), Duration.ofSeconds(9))).orElseThrow();
        assertEquals(lock.token(), extended.token(), "the same connection, the same token");
        timers.advanceTo(T0.plusSeconds(10));
        assertTrue(locks.held("job"), "the old lockAtMostUntil no longer closes it");
        timers.advanceTo(T0.plusSeconds(11));
        extended.unlock();
        assertTrue(locks.held("job"), "held until the new lockAtLeastUntil");
        timers.advanceTo(T0.plusSeconds(14).minus(NS));
        assertTrue(locks.held("job"));
        timers.advanceTo(T0.plusSeconds(14));
        assertFalse(locks.held("job"));
    }

    @Test
    void extendIsEmptyOnceLockAtMostForHasPassedAndClosesTheConnection() {
        MonolockSimpleLock lock = lock(Duration.ofMillis(2), Duration.ZERO);
        clock.now = T0.plusMillis(2); // the timer has not run yet: extend sees the deadline itself
        assertTrue(lock.doExtend(config(clock.now, Duration.ofSeconds(10), Duration.ZERO)).isEmpty());
        assertFalse(locks.held("job"));
    }

    @Test
    void extendIsEmptyOnceTheLeaseIsLost() {
        MonolockSimpleLock lock = lock(Duration.ofSeconds(10), Duration.ZERO);
        locks.holders.get("job").lost = true;
        assertFalse(lock.isValid());
        assertTrue(lock.doExtend(config(clock.now, Duration.ofSeconds(10), Duration.ZERO)).isEmpty());
        assertFalse(locks.held("job"));
    }

    @Test
    void unlockOfALostLeaseClosesAtOnceDespiteLockAtLeastFor() {
        SimpleLock lock = lock(Duration.ofMinutes(5), Duration.ofSeconds(30));
        locks.holders.get("job").lost = true;
        lock.unlock();
        assertFalse(locks.held("job"));
    }

    @Test
    void aLockAtMostForPassedAtTheGrantClosesAtOnce() {
        LockConfiguration c = config(T0, Duration.ofMillis(2), Duration.ZERO);
        clock.now = T0.plusMillis(3); // the grant came after the deadline
        assertTrue(provider.lock(c).isPresent());
        timers.advanceTo(clock.now);
        assertFalse(locks.held("job"));
    }

    @Test
    void aBusyLockIsEmpty() {
        lock(Duration.ofMinutes(5), Duration.ZERO);
        assertTrue(provider.lock(config(clock.now, Duration.ofMinutes(5), Duration.ZERO)).isEmpty());
    }

    @Test
    void currentTokenIsTheTakingThreadsUntilUnlock() throws Exception {
        MonolockSimpleLock lock = lock(Duration.ofMinutes(5), Duration.ofSeconds(30));
        assertEquals(Optional.of(lock.token()), provider.currentToken("job"));
        assertEquals(Optional.empty(), provider.currentToken("other"));
        AtomicReference<Optional<FencingToken>> elsewhere = new AtomicReference<>();
        Thread t = new Thread(() -> elsewhere.set(provider.currentToken("job")));
        t.start();
        t.join();
        assertEquals(Optional.empty(), elsewhere.get(), "another thread did not take it");
        lock.unlock();
        assertEquals(Optional.empty(), provider.currentToken("job"), "the task is done, though the connection stays for lockAtLeastFor");
    }

    @Test
    void closeClosesTheConnectionsHeldForLockAtLeastForAndStopsTheTimers() {
        lock(Duration.ofMinutes(5), Duration.ofSeconds(30)).unlock();
        assertTrue(locks.held("job"));
        provider.close();
        assertFalse(locks.held("job"));
        assertTrue(timers.closed);
    }

    @Test
    void anInterruptedLockThrowsAndKeepsTheFlag() {
        MonolockLockProvider p = new MonolockLockProvider((name, lease) -> {
            throw new InterruptedException();
        }, Duration.ofSeconds(10), clock, timers);
        LockException e = assertThrows(LockException.class, () -> p.lock(config(clock.now, Duration.ofMinutes(5), Duration.ZERO)));
        assertTrue(Thread.interrupted(), "the interrupt flag stays set");
        assertTrue(e.getMessage().contains("'job'"), e.getMessage());
    }

    @Test
    void theLeaseIsChecked() {
        for (Duration bad : List.of(Duration.ZERO, Duration.ofMillis(-1), Duration.ofMillis(0x1_0000_0000L))) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> new MonolockLockProvider(locks, bad, clock, timers));
            assertTrue(e.getMessage().contains("from 1 ms to 4294967295 ms"), e.getMessage());
        }
        assertEquals(Duration.ofMillis(0xFFFF_FFFFL), new MonolockLockProvider(locks, Duration.ofMillis(0xFFFF_FFFFL), clock, timers).lease());
    }
}
