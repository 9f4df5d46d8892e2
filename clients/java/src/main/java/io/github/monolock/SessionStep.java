package io.github.monolock;

import java.nio.ByteBuffer;

/**
 * The rules of one connection's claim on one lock, as a pure step: each input
 * (connected, bytes read, the connection lost, a release, a timer) comes with
 * the monotonic time in nanoseconds and returns the actions it calls for, a
 * set of the {@code SEND}, {@code GRANTED}, {@code FAILED}, {@code LOST},
 * {@code CLOSE} and {@code ABORT} bits; {@link #wakeAt()} is when
 * {@link #tick} next has work.
 * No I/O, no clock, no threads: the I/O loop owns one per connection and is
 * the only caller, and the tests drive it with a clock of their own.
 *
 * <p>The rules are those of docs/protocol.md, "Writing a client in another
 * language", cited by number.
 *
 * <p>Whoever sends the first FIN keeps the connection's TIME_WAIT. A release
 * therefore sends RELEASE and waits for the server to close first, at most
 * min(lease, 2 s); the client's own close is a normal one only once the
 * server has closed, and abortive (an RST, which leaves no TIME_WAIT) when
 * the client gives up on the server.
 */
final class SessionStep {
    /** Write {@link #takeSend()} to the connection. */
    static final int SEND = 1;
    /** The lock was granted: {@link #token()}. */
    static final int GRANTED = 2;
    /** The attempt ended before the grant: {@link #failure()}. */
    static final int FAILED = 4;
    /** The held lock was lost: {@link #lost()}. Stop the work. */
    static final int LOST = 8;
    /** Close the connection now. */
    static final int CLOSE = 16;
    /** With CLOSE: abortively, SO_LINGER {on, 0}, an RST instead of a FIN. */
    static final int ABORT = 32;

    /** The longest wait for the server's close after RELEASE (the lease when shorter). */
    static final long MAX_RELEASE_WAIT_NANOS = 2_000_000_000L;

    /** No time: {@link #wakeAt()} when nothing is due. */
    static final long NEVER = Long.MAX_VALUE;

    /** wait: as long as it takes. */
    static final long WAIT_FOREVER = -1;

    private static final byte[] HEARTBEAT = {Wire.TYPE_HEARTBEAT};
    private static final byte[] RELEASE = {Wire.TYPE_RELEASE};

    /** How an ended session closes its connection. */
    private enum Ending {
        /** The server ended it (ERROR, end of stream): it closes first; close at once, normally. */
        BY_SERVER,
        /** A read or write failed, or no session began: close at once, abortively. */
        FAILED,
        /** The client gave up on the server (silence, a violation): abortively, once the work stopped. */
        GAVE_UP,
        /** The client ends a live session: RELEASE, then the server's close. */
        RELEASE
    }

    enum State { CONNECTING, SENT, WAITING, HELD }

    final String name;
    final long leaseMs;
    private final byte[] acquire;
    private final long leaseNanos;
    /** 0.8 × lease, exact in nanoseconds. */
    final long timeoutNanos;
    private final long waitNanos;
    private final long connectTimeoutNanos;
    private final String address;
    final HeartbeatSchedule schedule;
    private final Wire.Decoder decoder = new Wire.Decoder();

    private State state = State.CONNECTING;
    private boolean ended;   // lost, failed or released: no more requests
    private boolean closed;  // CLOSE was returned
    private boolean workStopped;
    private boolean releasing; // RELEASE sent: what the server says now is the end
    private boolean abortClose; // the close to come is abortive
    private long token;
    private MonolockException failure;
    private LockLostException lost;

    private byte[] send;
    private boolean inFlight;
    private long lastSend;
    /** Send of the newest answered request + 0.8 × lease (rule 8). */
    private long deadline = NEVER;
    private long heartbeatDue = NEVER;
    private long connectDeadline = NEVER;
    private long waitDeadline = NEVER;
    private long closeBy = NEVER;

    /**
     * @param waitNanos {@link #WAIT_FOREVER}, 0 (busy when queued) or the longest wait
     */
    SessionStep(String address, String name, byte[] nameBytes, long leaseMs, long waitNanos, long connectTimeoutNanos) {
        this.address = address;
        this.name = name;
        this.leaseMs = leaseMs;
        this.acquire = Wire.acquire(leaseMs, nameBytes);
        this.leaseNanos = leaseMs * 1_000_000L;
        this.timeoutNanos = leaseMs * 800_000L;
        this.waitNanos = waitNanos;
        this.connectTimeoutNanos = connectTimeoutNanos;
        this.schedule = new HeartbeatSchedule(leaseMs);
    }

    // --- inputs ------------------------------------------------------------

    /** The connection attempt begins (TCP connect, and the TLS handshake if any). */
    int start(long now) {
        connectDeadline = now + connectTimeoutNanos;
        if (waitNanos > 0) waitDeadline = now + waitNanos;
        return 0;
    }

    /** The connection is up: ACQUIRE goes out, and the give-up clock runs from it (rule 8). */
    int connected(long now) {
        if (ended || state != State.CONNECTING) return 0;
        connectDeadline = NEVER;
        state = State.SENT;
        send(acquire, now);
        deadline = now + timeoutNanos;
        return SEND;
    }

    /** Bytes read from the server (rule 2: any split, any join). */
    int receive(ByteBuffer in, long now) {
        if (ended) {
            // Gave up, or released: nothing the server says now changes that
            // (after RELEASE an old server's ERROR 0x13 included).
            in.position(in.limit());
            return 0;
        }
        int actions = 0;
        if (now >= deadline) {
            // The answer came after the give-up time: it does not revive the lock.
            return giveUp(now);
        }
        while (!ended && decoder.next(in)) {
            actions |= frame(now);
        }
        // A heartbeat queued by one frame and cancelled by a later one (the
        // session ended) is not sent.
        if (send == null) actions &= ~SEND;
        return actions;
    }

    /** The server closed the connection (end of stream): it closed first, so the client's close is a normal one. */
    int endOfStream(long now) {
        if (ended) {
            abortClose = false;
            return closeNow();
        }
        return lost(now, "the server closed the connection", null, true, Ending.BY_SERVER);
    }

    /** A failed read or write: lost (or failed) and closed at once, abortively. */
    int connectionLost(long now, String detail, Throwable cause, boolean retriable) {
        if (ended) {
            abortClose = true;
            return closeNow();
        }
        return lost(now, detail, cause, retriable, Ending.FAILED);
    }

    private int lost(long now, String detail, Throwable cause, boolean retriable, Ending how) {
        String what = state == State.CONNECTING ? "cannot connect to " + address + ": " + detail
                : "connection to " + address + " lost: " + detail;
        ServerUnavailableException e = new ServerUnavailableException("monolock: " + what
                + (retriable ? "; is the server running there? A new attempt may succeed" : ""), cause, retriable);
        return end(e, LockLostException.Why.CLOSED, now, how);
    }

    /**
     * The caller released the lock, or its work has stopped after a loss, or
     * it abandoned the attempt before the grant (rule 7). A live session sends
     * RELEASE and closes once the server has closed, or abortively at
     * min(lease, 2 s); one given up on closes abortively at once.
     */
    int release(long now) {
        workStopped = true;
        if (closed || releasing) return 0;
        if (!ended && state != State.CONNECTING) return startRelease(now);
        // Not connected yet, or given up on and kept open for the work (a
        // session the server ended is closed already): an abortive close.
        ended = true;
        heartbeatDue = NEVER;
        send = null;
        abortClose = true;
        return closeNow();
    }

    /** The client itself is closing: no time to wait for the server, an abortive close at once. */
    int abandon(long now) {
        workStopped = true;
        ended = true;
        heartbeatDue = NEVER;
        send = null;
        abortClose = true;
        return closeNow();
    }

    /**
     * The work found the give-up deadline passed (Lease.isValid) before the
     * timer did: it gives the lock up now, whatever answer may be on its way,
     * so the work and the client agree the lock is lost.
     */
    int expired(long now) {
        if (ended || state != State.HELD) return 0;
        return giveUp(now);
    }

    /** The timers: connect, wait, give-up, heartbeat, close. */
    int tick(long now) {
        if (!ended) {
            if (now >= connectDeadline) {
                return end(new ServerUnavailableException("monolock: cannot connect to " + address + " within "
                        + connectTimeoutNanos / 1_000_000 + " ms; is the server running there?", null, true),
                        LockLostException.Why.CLOSED, now, Ending.FAILED);
            }
            if (now >= waitDeadline && state != State.HELD) {
                return end(busyOrSilent(), LockLostException.Why.CLOSED, now, Ending.RELEASE);
            }
            if (now >= deadline) return giveUp(now);
            if (!inFlight && now >= heartbeatDue) {
                send(HEARTBEAT, now);
                return SEND;
            }
            return 0;
        }
        if (!closed && now >= closeBy) return closeNow();
        return 0;
    }

    // --- outputs -----------------------------------------------------------

    /** Whether RELEASE was sent: the session waits for the server's close. */
    boolean releasing() {
        return releasing;
    }

    /** When {@link #tick} next has something to do, or {@link #NEVER}. */
    long wakeAt() {
        if (closed) return NEVER;
        if (ended) return closeBy;
        long t = Math.min(connectDeadline, Math.min(deadline, state == State.HELD ? NEVER : waitDeadline));
        if (!inFlight) t = Math.min(t, heartbeatDue);
        return t;
    }

    /** The frame to write now, once: ACQUIRE, HEARTBEAT or RELEASE. */
    byte[] takeSend() {
        byte[] b = send;
        send = null;
        return b;
    }

    /** Ownership is confirmed at now: granted, not ended, within 0.8 × lease of the newest answered send. */
    boolean valid(long now) {
        return state == State.HELD && !ended && now < deadline;
    }

    /** The give-up time while held; a volatile copy of it lets any thread check validity. */
    long deadline() {
        return deadline;
    }

    State state() {
        return state;
    }

    boolean ended() {
        return ended;
    }

    boolean isClosed() {
        return closed;
    }

    long token() {
        return token;
    }

    MonolockException failure() {
        return failure;
    }

    LockLostException lost() {
        return lost;
    }

    boolean inFlight() {
        return inFlight;
    }

    long lastSend() {
        return lastSend;
    }

    // --- rules -------------------------------------------------------------

    private void send(byte[] frame, long now) {
        send = frame;
        lastSend = now;
        inFlight = true;
        heartbeatDue = NEVER;
    }

    /** One decoded frame (rule 4): each WAITING or ACQUIRED answers the request in flight, except the pushed ACQUIRED. */
    private int frame(long now) {
        int type = decoder.type;
        if (type == Wire.TYPE_ERROR) {
            MonolockException e = decoder.code < Wire.FIRST_CLIENT_ERROR
                    ? new ServerUnavailableException(decoder.code, decoder.reason)
                    : new MonolockServerException(decoder.code, decoder.reason);
            return end(e, LockLostException.Why.SERVER, now, Ending.BY_SERVER);
        }
        // A heartbeat that an earlier frame of this read queued is not written
        // yet: nothing can answer it. A push or an ERROR is still an ordinary
        // frame; only a second answer is a violation.
        boolean answerable = inFlight && send == null;
        if (type == Wire.TYPE_WAITING && state != State.HELD && answerable) {
            boolean first = state == State.SENT;
            state = State.WAITING;
            int actions = acknowledged(now);
            if (first && waitNanos == 0) {
                return end(new LockBusyException(name, "monolock: lock \"" + name
                        + "\" is busy: another client holds it (tryLock does not wait; use lock to wait in the queue)"),
                        LockLostException.Why.CLOSED, now, Ending.RELEASE);
            }
            return actions;
        }
        if (type == Wire.TYPE_ACQUIRED && state == State.SENT) {
            grant();
            return GRANTED | acknowledged(now);
        }
        if (type == Wire.TYPE_ACQUIRED && state == State.WAITING) {
            grant(); // the promotion push answers no request; a heartbeat in flight gets its own answer
            return GRANTED;
        }
        if (type == Wire.TYPE_ACQUIRED && state == State.HELD && decoder.token == token && answerable) {
            return acknowledged(now);
        }
        String detail;
        if (type == Wire.TYPE_WAITING && state == State.HELD) {
            detail = "WAITING after ACQUIRED";
        } else if (type == Wire.TYPE_ACQUIRED && state == State.HELD && decoder.token != token) {
            detail = "token changed from " + Long.toUnsignedString(token) + " to " + Long.toUnsignedString(decoder.token);
        } else if ((type == Wire.TYPE_WAITING || type == Wire.TYPE_ACQUIRED) && inFlight) {
            detail = "a second answer: " + (type == Wire.TYPE_WAITING ? "WAITING" : "ACQUIRED")
                    + " after the answer to the request in flight, before the next request";
        } else if (type == Wire.TYPE_WAITING || type == Wire.TYPE_ACQUIRED) {
            detail = (type == Wire.TYPE_WAITING ? "WAITING" : "ACQUIRED") + " with no request in flight";
        } else {
            detail = "unknown frame type " + Wire.hex(type) + " from the server";
        }
        // A broken frame is treated like silence (rule 7): the work stops now, the close waits for it.
        return end(new ProtocolViolationException("monolock: protocol violation by the server at " + address + ": " + detail
                + "; this is a bug in the server or in something between it and this client"),
                LockLostException.Why.PROTOCOL, now, Ending.GAVE_UP);
    }

    private void grant() {
        state = State.HELD;
        token = decoder.token;
        waitDeadline = NEVER;
    }

    /**
     * The server has seen the request in flight: ownership is confirmed until
     * its send + 0.8 × lease, and the next heartbeat is due one interval after
     * that send, at once when this answer came later than that (rule 3).
     */
    private int acknowledged(long now) {
        schedule.observe(now - lastSend);
        inFlight = false;
        deadline = lastSend + timeoutNanos;
        heartbeatDue = lastSend + schedule.intervalNanos();
        if (now >= heartbeatDue) {
            send(HEARTBEAT, now);
            return SEND;
        }
        return 0;
    }

    private int giveUp(long now) {
        return end(new ServerUnavailableException("monolock: no answer from the server at " + address
                + " within 0.8 × lease (" + timeoutNanos / 1_000_000.0 + " ms) of the newest answered request;"
                + " the network or the server stalled", null, true),
                LockLostException.Why.TIMEOUT, now, Ending.GAVE_UP);
    }

    private MonolockException busyOrSilent() {
        if (state == State.WAITING) {
            return new LockBusyException(name, "monolock: lock \"" + name + "\" is still busy after waiting "
                    + waitNanos / 1_000_000 + " ms; wait longer, or use lock to wait as long as it takes");
        }
        return new ServerUnavailableException("monolock: no answer from " + address + " for lock \"" + name
                + "\" within the wait of " + waitNanos / 1_000_000 + " ms", null, true);
    }

    /**
     * Ends the session because of e. Before the grant the attempt fails and
     * the connection closes at once (a queued or unanswered attempt leaves
     * with RELEASE). After it the lock is lost (rule 8): the connection
     * closes at once when the server has ended the session already (normally)
     * or a read or write failed (abortively); when the client gave up on the
     * server, abortively once the work stops or at the last send + lease,
     * whichever comes first (rule 7): the server's expiry, not this close,
     * must hand the lock on while the old work may still run.
     */
    private int end(MonolockException e, LockLostException.Why why, long now, Ending how) {
        if (how == Ending.RELEASE && state != State.CONNECTING) {
            failure = e;
            return FAILED | startRelease(now);
        }
        ended = true;
        heartbeatDue = NEVER;
        send = null;
        abortClose = how != Ending.BY_SERVER;
        if (state != State.HELD) {
            failure = e;
            return FAILED | closeNow();
        }
        lost = new LockLostException(name, why, e, now);
        if (how != Ending.GAVE_UP || workStopped) return LOST | closeNow();
        closeBy = lastSend + leaseNanos;
        return LOST | (now >= closeBy ? closeNow() : 0);
    }

    /** RELEASE goes out; the server's close ends the session, or at the bound an abortive close does. */
    private int startRelease(long now) {
        ended = true;
        releasing = true;
        heartbeatDue = NEVER;
        waitDeadline = NEVER;
        send = RELEASE;
        abortClose = true; // unless the server closes first
        closeBy = now + Math.min(leaseNanos, MAX_RELEASE_WAIT_NANOS);
        return SEND;
    }

    private int closeNow() {
        if (closed) return 0;
        closed = true;
        closeBy = NEVER;
        return CLOSE | (abortClose ? ABORT : 0);
    }
}
