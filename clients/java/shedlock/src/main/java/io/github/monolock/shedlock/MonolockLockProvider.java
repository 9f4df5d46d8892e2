package io.github.monolock.shedlock;

import io.github.monolock.FencingToken;
import io.github.monolock.MonolockClient;
import java.time.Clock;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import net.javacrumbs.shedlock.core.ExtensibleLockProvider;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.SimpleLock;
import net.javacrumbs.shedlock.support.LockException;

/**
 * A ShedLock {@link ExtensibleLockProvider} on monolock: each lock is one
 * connection to the server, held with heartbeats.
 *
 * <ul>
 *   <li>{@link #lock(LockConfiguration)} never waits: when the lock is held
 *       elsewhere the attempt, queued by the server, is given up, its
 *       connection closed, and the result is empty.</li>
 *   <li>lockAtMostFor: the provider closes the connection at createdAt +
 *       lockAtMostFor, even if the task still runs.</li>
 *   <li>lockAtLeastFor: {@code unlock()} keeps the connection until createdAt +
 *       lockAtLeastFor, then closes it. {@code extend(...)} moves both bounds
 *       and returns empty once the lock is no longer valid.</li>
 *   <li>The lease (default 10 s) is how long the server keeps the lock of a
 *       node it no longer hears from: a node that dies frees its locks after
 *       the lease, whatever lockAtMostFor says.</li>
 * </ul>
 *
 * <p>The task's fencing token: {@link MonolockSimpleLock#token()}, or
 * {@link #currentToken(String)} from inside a task run by a
 * {@code LockingTaskExecutor} or {@code @SchedulerLock}.
 *
 * <p>{@link #close()} closes the connections still held (for lockAtLeastFor)
 * and stops the provider's timer thread; it does not close the client.
 */
public final class MonolockLockProvider implements ExtensibleLockProvider, AutoCloseable {
    /** The lease when none is given. */
    public static final Duration DEFAULT_LEASE = Duration.ofSeconds(10);
    private static final Duration LONGEST_LEASE = Duration.ofMillis(0xFFFF_FFFFL);

    private final Locks locks;
    private final Duration lease;
    private final Clock clock;
    private final Timers timers;
    private final Set<Hold> open = ConcurrentHashMap.newKeySet();
    private final ThreadLocal<Map<String, Hold>> takenHere = ThreadLocal.withInitial(HashMap::new);

    /**
     * A provider with the default lease of 10 s.
     *
     * @param client the client to take the locks with; the provider does not close it
     */
    public MonolockLockProvider(MonolockClient client) {
        this(client, DEFAULT_LEASE);
    }

    /**
     * A provider with the given lease.
     *
     * @param client the client to take the locks with; the provider does not close it
     * @param lease how long the server keeps a lock without hearing from this
     *     node: the time after which a dead node's locks are free. From 1 ms
     *     to 2^32 − 1 ms; choose it above the longest pause (GC included)
     *     the node must survive
     * @throws IllegalArgumentException when the lease is out of range
     */
    public MonolockLockProvider(MonolockClient client, Duration lease) {
        this(Locks.of(Objects.requireNonNull(client, "client")), lease, Clock.systemUTC(), null);
    }

    /** With a clock and timers of the caller's (the tests'); null timers: a thread of the provider's own. */
    MonolockLockProvider(Locks locks, Duration lease, Clock clock, Timers timers) {
        this.locks = locks;
        this.lease = checkLease(lease);
        this.clock = clock;
        this.timers = timers != null ? timers : Timers.onThread(clock);
    }

    private static Duration checkLease(Duration lease) {
        Objects.requireNonNull(lease, "lease");
        if (lease.compareTo(Duration.ofMillis(1)) < 0 || lease.compareTo(LONGEST_LEASE) > 0) {
            throw new IllegalArgumentException("monolock-shedlock: the lease must be from 1 ms to 4294967295 ms, got "
                    + lease + "; the default is " + DEFAULT_LEASE);
        }
        return lease;
    }

    /**
     * The lease the provider asks the server for.
     *
     * @return the lease
     */
    public Duration lease() {
        return lease;
    }

    /**
     * Takes the lock if it is free, without waiting.
     *
     * @param configuration the lock's name and bounds
     * @return the lock, or empty when another node holds it
     * @throws io.github.monolock.MonolockException when the server cannot be
     *     reached or refuses the lock (for example the ACL); the task does not run
     * @throws LockException when the thread was interrupted meanwhile (the
     *     interrupt flag stays set)
     */
    @Override
    public Optional<SimpleLock> lock(LockConfiguration configuration) {
        Optional<Locks.Held> held;
        try {
            held = locks.tryLock(configuration.getName(), lease);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new LockException("monolock-shedlock: interrupted while taking lock '" + configuration.getName()
                    + "'; the task does not run", e);
        }
        if (held.isEmpty()) return Optional.empty();
        Hold hold = new Hold(held.get(), clock, timers, open::remove);
        open.add(hold);
        hold.closeAt(configuration.getLockAtMostUntil());
        takenHere.get().put(configuration.getName(), hold);
        return Optional.of(new MonolockSimpleLock(configuration, hold));
    }

    /**
     * The fencing token of the lock of that name that this thread took through
     * this provider, while its task runs: from the grant until
     * {@code unlock()}. ShedLock runs a task on the thread that took its lock
     * ({@code LockingTaskExecutor}, {@code @SchedulerLock}), so the task can
     * fence its writes without holding the {@link SimpleLock}.
     *
     * @param lockName the lock's name, as in {@code @SchedulerLock(name = ...)}
     * @return the token, or empty when this thread holds no such lock
     */
    public Optional<FencingToken> currentToken(String lockName) {
        Map<String, Hold> taken = takenHere.get();
        Hold hold = taken.get(lockName);
        if (hold == null) return Optional.empty();
        if (hold.isUnlocked()) {
            taken.remove(lockName);
            return Optional.empty();
        }
        return Optional.of(hold.token());
    }

    /** Closes the connections this provider still holds and stops its timers; the client stays open. */
    @Override
    public void close() {
        for (Hold hold : open) hold.close();
        timers.close();
    }
}
