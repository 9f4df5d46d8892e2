package io.github.monolock;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.time.Duration;
import java.util.Collections;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.ThreadLocalRandom;
import javax.net.ssl.SSLContext;

/**
 * Takes locks from a monolock server. Every lock is its own connection; one
 * I/O thread (a NIO selector) and one timer serve all of them, so a client
 * waiting for 10,000 locks at once still has one thread of its own. A client
 * is safe for use by many threads; make one per server and process, and
 * {@link #close()} it at shutdown (that releases every lock it still holds).
 *
 * <pre>{@code
 * MonolockClient client = MonolockClient.builder("127.0.0.1:7070").build();
 * try (Lease lease = client.lock("nightly-import", Duration.ofSeconds(2))) {
 *     if (!lease.isValid()) return;
 *     store.write(item, lease.token().toString());
 * }
 * }</pre>
 *
 * <p>A client given several addresses ({@link #builder(List)}; a host name
 * that resolves to several addresses counts as each of them) follows the
 * server that serves: each connection starts from the address whose
 * connection came up last and tries the others in order when a connect is
 * refused or fails, all within the connect timeout. What happens between
 * attempts is unchanged ({@link #run}).
 *
 * <p>The rules are those of the monolock wire protocol: a permanent reader
 * (a promotion arrives unasked), one heartbeat in flight every quarter lease
 * (less by twice the smoothed round-trip time, at least min(100 ms, lease/4)),
 * and the lock given up 0.8 × lease after the send of the newest answered
 * request, before the server could hand it to anyone else.
 */
public final class MonolockClient implements AutoCloseable {
    private final Addresses addresses;
    private final long connectTimeoutNanos;
    private final IoLoop loop;

    private MonolockClient(Builder b) {
        this.addresses = new Addresses(b.addresses, b.resolver);
        this.connectTimeoutNanos = b.connectTimeout.toNanos();
        try {
            this.loop = new IoLoop(b.sslContext, b.threadFactory);
        } catch (IOException e) {
            throw new UncheckedIOException("monolock: cannot open a NIO selector: " + e.getMessage(), e);
        }
    }

    /**
     * A builder for a client of the server at address.
     *
     * @param address host:port, or [v6]:port, for example {@code 127.0.0.1:7070}
     * @return the builder
     * @throws IllegalArgumentException when the address is not host:port
     */
    public static Builder builder(String address) {
        return new Builder(Collections.singletonList(address));
    }

    /**
     * A builder for a client of the server at any of several addresses, for
     * example a primary and its standby: each connection starts from the one
     * whose connection came up last, and tries the others in this order when
     * a connect is refused or fails, within the connect timeout.
     *
     * @param addresses host:port or [v6]:port each, at least one; a host name
     *     stands for every address it resolves to
     * @return the builder
     * @throws IllegalArgumentException when the list is empty or an address is not host:port
     */
    public static Builder builder(List<String> addresses) {
        return new Builder(addresses);
    }

    /** Options of a {@link MonolockClient}. */
    public static final class Builder {
        private final List<String> addresses;
        private SSLContext sslContext;
        private Duration connectTimeout = Duration.ofSeconds(10);
        private ThreadFactory threadFactory;
        private Addresses.Resolver resolver = InetAddress::getAllByName;

        private Builder(List<String> addresses) {
            // Refused here, before anything else is set.
            this.addresses = new Addresses(addresses, resolver).given();
        }

        /** How host names are resolved; the tests of this package give names of their own. */
        Builder resolver(Addresses.Resolver r) {
            this.resolver = r;
            return this;
        }

        /**
         * Connects with TLS, or mutual TLS when the context has a key manager
         * with the client's certificate. The server's certificate must name
         * the host or IP dialled. Every connection of the client uses this
         * context's session cache, so a reconnecting client resumes its TLS
         * session (an abbreviated handshake) where the server can.
         *
         * @param ctx the TLS context; null for plain TCP
         * @return this builder
         */
        public Builder sslContext(SSLContext ctx) {
            this.sslContext = ctx;
            return this;
        }

        /**
         * How long a connection attempt (TCP and the TLS handshake) may take; 10 s by default.
         *
         * @param timeout a positive duration
         * @return this builder
         */
        public Builder connectTimeout(Duration timeout) {
            if (timeout == null || timeout.isNegative() || timeout.isZero()) {
                throw new IllegalArgumentException("monolock: connectTimeout must be positive, got " + timeout);
            }
            this.connectTimeout = timeout;
            return this;
        }

        /**
         * Makes the client's one I/O thread (a daemon thread named
         * monolock-io-N by default).
         *
         * @param factory the thread factory
         * @return this builder
         */
        public Builder threadFactory(ThreadFactory factory) {
            this.threadFactory = factory;
            return this;
        }

        /**
         * The client; it connects only when a lock is asked for.
         *
         * @return the client
         */
        public MonolockClient build() {
            return new MonolockClient(this);
        }
    }

    /**
     * The server's address as given; the first one when several were.
     *
     * @return host:port
     */
    public String address() {
        return addresses.given().get(0);
    }

    /**
     * The server's addresses as given, in the order they are tried.
     *
     * @return host:port each
     */
    public List<String> addresses() {
        return addresses.given();
    }

    /**
     * Waits in the lock's FIFO queue as long as it takes, and returns the held
     * lock. Interrupting the thread leaves the queue.
     *
     * @param name the lock's name, 1 to 255 bytes of UTF-8
     * @param lease how long the server keeps the lock without hearing from
     *     this client: a failure detector, not a hold limit (the client
     *     heartbeats every quarter lease). At least 1 ms; a fraction rounds up
     * @return the held lock; close it
     * @throws InterruptedException when the thread was interrupted while waiting
     * @throws IllegalArgumentException for a name or lease the protocol cannot carry (before connecting)
     * @throws ServerUnavailableException cannot connect, the connection was lost or silent, or a server condition (code below 0x10)
     * @throws MonolockServerException an ERROR of 0x10 or above (not retried)
     * @throws LockLostException the lock was lost in the same moment it was granted
     */
    public Lease lock(String name, Duration lease) throws InterruptedException {
        return await(acquire(name, lease, SessionStep.WAIT_FOREVER));
    }

    /**
     * Waits in the lock's queue at most maxWait, and returns the held lock.
     *
     * @param name the lock's name
     * @param lease the lease, as for {@link #lock(String, Duration)}
     * @param maxWait how long to wait for the grant; zero does not wait
     * @return the held lock; close it
     * @throws LockBusyException when another client still held the lock after maxWait
     * @throws InterruptedException when the thread was interrupted while waiting
     * @throws ServerUnavailableException as for {@link #lock(String, Duration)}
     */
    public Lease lock(String name, Duration lease, Duration maxWait) throws InterruptedException {
        return await(acquire(name, lease, waitNanos(maxWait)));
    }

    /**
     * Takes the lock if it is free, without waiting in the queue.
     *
     * @param name the lock's name
     * @param lease the lease, as for {@link #lock(String, Duration)}
     * @return the held lock, or empty when another client holds it
     * @throws InterruptedException when the thread was interrupted meanwhile
     * @throws ServerUnavailableException as for {@link #lock(String, Duration)}
     */
    public Optional<Lease> tryLock(String name, Duration lease) throws InterruptedException {
        return busyIsEmpty(acquire(name, lease, 0));
    }

    /**
     * Waits in the queue at most maxWait.
     *
     * @param name the lock's name
     * @param lease the lease, as for {@link #lock(String, Duration)}
     * @param maxWait how long to wait for the grant; zero does not wait
     * @return the held lock, or empty when it was still held by another client after maxWait
     * @throws InterruptedException when the thread was interrupted meanwhile
     * @throws ServerUnavailableException as for {@link #lock(String, Duration)}
     */
    public Optional<Lease> tryLock(String name, Duration lease, Duration maxWait) throws InterruptedException {
        return busyIsEmpty(acquire(name, lease, waitNanos(maxWait)));
    }

    private static long waitNanos(Duration maxWait) {
        if (maxWait == null || maxWait.isNegative()) {
            throw new IllegalArgumentException("monolock: maxWait must be zero or positive, got " + maxWait);
        }
        return maxWait.toNanos();
    }

    /**
     * Joins the lock's queue and completes with the held lock, without a thread
     * waiting for it: 10,000 pending futures cost 10,000 connections and no
     * thread. Cancelling the future leaves the queue. It completes
     * exceptionally with the exceptions of {@link #lock(String, Duration)}; its callbacks run on
     * the client's I/O thread (keep them short, or use the ...Async variants).
     *
     * @param name the lock's name
     * @param lease the lease, as for {@link #lock(String, Duration)}
     * @return the future of the held lock
     * @throws IllegalArgumentException for a name or lease the protocol cannot carry
     */
    public CompletableFuture<Lease> lockAsync(String name, Duration lease) {
        return acquire(name, lease, SessionStep.WAIT_FOREVER);
    }

    /**
     * Takes the lock, runs work while holding it, and releases it when work
     * returns or throws. Failures before the work starts that a new connection
     * may overcome (cannot connect, lost or silent while queued, server codes
     * below 0x10) are retried: after "server shutting down" (0x01) after a
     * random wait in [0, min(1 s, lease/4)], otherwise with backoff (100 ms
     * doubling to 5 s, with jitter); every attempt queues anew at the back.
     * The work runs at most once. The loss of the lock interrupts the work's
     * thread; run then throws the {@link LockLostException}, with the work's
     * own exception, if any, added as suppressed.
     *
     * @param <E> what the work may throw
     * @param name the lock's name
     * @param lease the lease, as for {@link #lock(String, Duration)}
     * @param work the guarded work
     * @throws E what the work threw, while the lock was held
     * @throws InterruptedException when interrupted while waiting (not by the loss)
     * @throws LockLostException when ownership ended before the work returned
     * @throws MonolockServerException an ERROR of 0x10 or above (not retried)
     */
    public <E extends Exception> void run(String name, Duration lease, LeaseWork<E> work) throws E, InterruptedException {
        Objects.requireNonNull(work, "work");
        Backoff backoff = new Backoff(n -> ThreadLocalRandom.current().nextLong(n));
        Validate.leaseMs(lease);
        long leaseNanos = lease.toNanos();
        Lease held;
        while (true) {
            try {
                held = lock(name, lease);
                break;
            } catch (ServerUnavailableException e) {
                Backoff.Retry retry = Backoff.after(e);
                if (retry == Backoff.Retry.NO) throw e;
                long wait = backoff.next();
                if (retry == Backoff.Retry.SHUTDOWN_WAIT) wait = backoff.shutdownJitter(leaseNanos);
                Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
            }
        }
        runHeld(held, work);
    }

    @SuppressWarnings("unchecked")
    private static <E extends Exception> void runHeld(Lease lease, LeaseWork<E> work) throws E {
        Throwable failed = null;
        lease.bindWorker(Thread.currentThread());
        try {
            work.run(lease);
        } catch (Throwable t) {
            failed = t;
        } finally {
            lease.unbindWorker();
            lease.close();
        }
        LockLostException lost = lease.lost().getNow(null);
        if (lost != null) {
            if (failed != null) lost.addSuppressed(failed);
            throw lost;
        }
        if (failed == null) return;
        if (failed instanceof RuntimeException) throw (RuntimeException) failed;
        if (failed instanceof Error) throw (Error) failed;
        throw (E) failed;
    }

    /**
     * Closes every connection, releasing the locks still held, fails the
     * attempts still waiting, and stops the I/O thread; returns once it has
     * stopped (at most a few seconds; at once when called from a callback on
     * that thread). Closing twice is harmless.
     */
    @Override
    public void close() {
        loop.shutdown(5_000);
    }

    // --- internals -----------------------------------------------------------

    private CompletableFuture<Lease> acquire(String name, Duration lease, long waitNanos) {
        byte[] nameBytes = Validate.name(name);
        long leaseMs = Validate.leaseMs(lease);
        SessionStep step = new SessionStep(addresses.describe(), name, nameBytes, lease.toNanos(), leaseMs, waitNanos,
                connectTimeoutNanos);
        List<Addresses.Candidate> candidates;
        try {
            // Resolved at each attempt, so a name moved to a standby is followed.
            candidates = addresses.candidates();
        } catch (ServerUnavailableException e) {
            return CompletableFuture.failedFuture(e);
        }
        Connection c = new Connection(loop, addresses, candidates, step);
        // A cancelled future leaves the queue.
        c.granted.whenComplete((l, e) -> {
            if (e instanceof CancellationException) loop.execute(() -> loop.apply(c, c.step.stop(System.nanoTime())));
        });
        loop.execute(() -> loop.open(c));
        return c.granted;
    }

    private static Lease await(CompletableFuture<Lease> f) throws InterruptedException {
        try {
            return f.get();
        } catch (InterruptedException e) {
            if (!f.cancel(false) && !f.isCompletedExceptionally()) f.join().close();
            throw e;
        } catch (ExecutionException e) {
            Throwable c = e.getCause();
            if (c instanceof RuntimeException) throw (RuntimeException) c;
            throw new IllegalStateException("monolock: unexpected failure", c);
        } catch (CancellationException e) {
            throw new ServerUnavailableException("monolock: the client was closed while waiting for the lock", e, false);
        }
    }

    private static Optional<Lease> busyIsEmpty(CompletableFuture<Lease> f) throws InterruptedException {
        try {
            return Optional.of(await(f));
        } catch (LockBusyException e) {
            return Optional.empty();
        }
    }
}
