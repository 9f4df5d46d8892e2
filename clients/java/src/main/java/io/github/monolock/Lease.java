package io.github.monolock;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;

/**
 * A held lock: one connection to the server, heartbeating until
 * {@link #close()} or until ownership is lost. Obtained from
 * {@link MonolockClient#lock}, {@link MonolockClient#tryLock},
 * {@link MonolockClient#lockAsync} or passed to the work of
 * {@link MonolockClient#run}.
 *
 * <p><strong>Ownership belongs to this object, not to a thread</strong>: any
 * thread may check it, pass its token on, or close it, and a lease taken on
 * one thread may be closed on another. The client's I/O thread keeps it alive
 * in the meantime; no thread of the caller has to stay with it.
 *
 * <p>Close it in every case, best with try-with-resources: closing releases
 * the lock (it closes the connection) and is idempotent. After a loss,
 * closing says the work has stopped, which lets the client close a connection
 * it kept open for that reason (see {@link #lost()}).
 */
public final class Lease implements AutoCloseable {
    private final Connection connection;
    private final FencingToken token;
    private final CompletableFuture<LockLostException> lost = new CompletableFuture<>();
    final CompletableFuture<Void> closed = new CompletableFuture<>();

    /** The give-up time (System.nanoTime), published by the I/O thread after each step. */
    volatile long deadline;
    /** isValid saw the deadline pass: false from then on, whatever answer comes next. */
    private volatile boolean expired;
    /** close was called: no longer held, while RELEASE waits for the server's close. */
    private volatile boolean released;
    private Thread worker;
    private boolean interruptedWorker;

    Lease(Connection connection, FencingToken token) {
        this.connection = connection;
        this.token = token;
    }

    /**
     * The lock's name.
     *
     * @return the name given to the client
     */
    public String name() {
        return connection.step.name;
    }

    /**
     * The lease as sent to the server, in whole milliseconds (a fraction is rounded up).
     *
     * @return the lease
     */
    public Duration lease() {
        return Duration.ofMillis(connection.step.leaseMs);
    }

    /**
     * The fencing token of this grant. Pass it with every write the lock
     * guards; the resource keeps the largest token it has accepted and refuses
     * smaller ones. It compares as unsigned (see {@link FencingToken}).
     *
     * @return the token, the same for the whole life of the lease
     */
    public FencingToken token() {
        return token;
    }

    /**
     * Whether ownership is confirmed at this instant: not lost, not closed, and
     * less than 0.8 × lease since the send of the newest request the server
     * answered. A cheap check of the monotonic clock, without waiting for the
     * I/O thread: call it before each side effect, so that work resuming after
     * a pause (a GC, a stopped VM) sees the loss before it writes. When it
     * finds the deadline passed it gives the lock up there and then: once
     * false, it stays false.
     *
     * @return true while the lock is confirmed
     */
    public boolean isValid() {
        if (expired || released || lost.isDone() || closed.isDone()) return false;
        if (System.nanoTime() - deadline < 0) return true;
        expired = true;
        IoLoop loop = connection.loop;
        loop.execute(() -> loop.apply(connection, connection.step.expired(System.nanoTime())));
        return false;
    }

    /**
     * Completed with the reason the moment ownership is lost (no answer within
     * 0.8 × lease, the connection ended, an ERROR, a protocol violation); never
     * completed when the lease is closed while held. Callbacks attached with
     * {@code thenAccept} and the like run on the client's I/O thread: keep them
     * short (set a flag, cancel a task), or use the {@code ...Async} variants.
     *
     * <p>After a loss by silence the connection stays open until this lease is
     * closed or the lease has passed since the last request was written, whichever comes
     * first: closing would tell the server to hand the lock on at once, while
     * the old work may still run. Close the lease once the work has stopped.
     *
     * @return the future of the loss
     */
    public CompletableFuture<LockLostException> lost() {
        return lost;
    }

    /**
     * Whether this TLS connection resumed the session of an earlier connection
     * of the same client (an abbreviated handshake) rather than making a full
     * handshake. False without TLS. JSSE uses each session ticket once, and
     * each connection brings the next one, so connections opened one after
     * another resume, while of several opened at the same moment only the
     * first does.
     *
     * @return true for a resumed TLS session
     */
    public boolean isTlsResumed() {
        return connection.tls != null && connection.tls.resumed();
    }

    /** The connection, for the tests of this package. */
    Connection connection() {
        return connection;
    }

    /**
     * Releases the lock: sends RELEASE and returns once the server has closed
     * the connection (the server, closing first, keeps its TIME_WAIT), or,
     * when it has not within min(lease, 2 s), once the client has reset it
     * (at once when called on the client's I/O thread). Idempotent; safe
     * after a loss, and never throws.
     */
    @Override
    public void close() {
        released = true;
        if (closed.isDone()) return;
        IoLoop loop = connection.loop;
        loop.execute(() -> loop.apply(connection, connection.step.stop(System.nanoTime())));
        if (loop.inLoop()) return;
        try {
            closed.get();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt(); // the close goes on without us
        } catch (ExecutionException e) {
            // closed never completes exceptionally.
        }
    }

    // --- the I/O thread and MonolockClient.run ---------------------------

    /** On the I/O thread: ownership ended; stop the work. */
    void markLost(LockLostException e) {
        if (!lost.complete(e)) return;
        synchronized (this) {
            if (worker != null) {
                interruptedWorker = true;
                worker.interrupt();
            }
        }
    }

    /** run's work runs on t: the loss interrupts it. */
    synchronized void bindWorker(Thread t) {
        worker = t;
        interruptedWorker = false;
        if (lost.isDone()) {
            interruptedWorker = true;
            t.interrupt();
        }
    }

    /** The work has returned; clears an interrupt the loss sent that the work did not take. */
    void unbindWorker() {
        boolean clear;
        synchronized (this) {
            worker = null;
            clear = interruptedWorker;
        }
        if (clear) Thread.interrupted();
    }
}
