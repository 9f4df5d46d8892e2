package io.github.monolock;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.Arrays;

/**
 * The client step of docs/protocol.md ("The client step"): one connection's
 * claim on one lock as a pure function from an <em>event</em> (dial, start,
 * written, the frames of one read, closed, stop, timer, expired), stamped
 * with the monotonic time in nanoseconds at which the driver saw it, to the
 * <em>actions</em> the driver carries out, in order ({@link Actions}). No I/O,
 * no clock, no threads: the I/O loop owns one step per connection and is the
 * only caller, and the tests drive it with a clock of their own; the scripts
 * of protocol/testdata/step pin every rule to the nanosecond.
 *
 * <p>At each event the step first takes every deadline that has passed at
 * {@code now} (the connect deadline, then the give-up, then the wait), as if
 * the timer had fired just before, and only then the event: a frame read at
 * the give-up deadline or later does not revive the lock, it only decides how
 * the connection ends.
 *
 * <p>Whoever sends the first FIN keeps the connection's TIME_WAIT. A release
 * therefore sends RELEASE and waits for the server to close first, at most
 * min(lease, 2 s); the client's own close is a normal one only once the
 * server has closed or the connection is gone, and abortive (an RST, which
 * leaves no TIME_WAIT) when the client gives up on the server.
 */
final class SessionStep {
    /** The longest wait for the server's close after RELEASE (the lease when shorter). */
    static final long MAX_RELEASE_BOUND_NANOS = 2_000_000_000L;

    /** No time: a wake of {@code off}. */
    static final long NEVER = Long.MAX_VALUE;

    /** wait: as long as it takes. */
    static final long WAIT_FOREVER = -1;

    private static final byte[] HEARTBEAT = {Wire.TYPE_HEARTBEAT};
    private static final byte[] RELEASE = {Wire.TYPE_RELEASE};

    /** How a connection ended without an ERROR ({@link #closed}). */
    enum Closed {
        /** The end of the stream: the server closed first. */
        EOF,
        /** A failed read, or a failed connect. */
        BROKEN,
        /** A TLS alert from the server: it refused the client's certificate. */
        TLS
    }

    /** How a write the step asked for failed ({@link #written}). */
    enum WriteError {
        /** The write failed: the connection is gone. */
        BROKEN,
        /** The write was still blocked at the give-up deadline. */
        DEADLINE
    }

    /** Why a session ended, in the words of docs/protocol.md's "Why a session ends". */
    enum Reason {
        BUSY("busy"), TIMEOUT("timeout"), CLOSED("closed"), CONNECT("connect"), SERVER("server"),
        PROTOCOL("protocol"), TLS("tls");

        final String word;

        Reason(String word) {
            this.word = word;
        }
    }

    /** Where the answers stand. */
    enum State { CONNECTING, SENT, WAITING, HELD }

    private enum Phase {
        /** dialled (or not yet started): the connect deadline runs. */
        CONNECTING,
        /** requests and answers flow. */
        LIVE,
        /** RELEASE sent: waiting, up to the release bound, for the server's close. */
        RELEASING,
        /** given up on (silence, a violation): nothing is sent, nothing revives the lock. */
        LINGERING,
        /** close or abort was returned: no more events. */
        CLOSED
    }

    /**
     * What one event asks the driver to do, in the order it does it: the
     * reports (waiting, granted, valid-until, ack, failed, lost), then send,
     * then close, abort or wake. One instance per step, refilled by each
     * event: read it before stepping the next event. No allocation per frame.
     */
    static final class Actions {
        /** The actions of docs/protocol.md's table. */
        enum Kind { WAITING, GRANTED, VALID_UNTIL, ACK, FAILED, LOST, SEND, CLOSE, ABORT, WAKE }

        private Kind[] kinds = new Kind[8];
        private long[] values = new long[8];
        private long[] srtts = new long[8];
        private long[] intervals = new long[8];
        private int size;
        private byte[] frame;

        int size() {
            return size;
        }

        Kind kind(int i) {
            return kinds[i];
        }

        /** GRANTED: the token; VALID_UNTIL and WAKE: the time ({@link #NEVER}: off); ACK: the RTT. */
        long value(int i) {
            return values[i];
        }

        /** ACK: the smoothed RTT. */
        long srtt(int i) {
            return srtts[i];
        }

        /** ACK: the heartbeat interval. */
        long interval(int i) {
            return intervals[i];
        }

        /** SEND: the frame to write (ACQUIRE, HEARTBEAT or RELEASE). */
        byte[] frame() {
            return frame;
        }

        boolean has(Kind k) {
            for (int i = 0; i < size; i++) {
                if (kinds[i] == k) return true;
            }
            return false;
        }

        private void clear() {
            size = 0;
            frame = null;
        }

        private void add(Kind k, long value) {
            add(k, value, 0, 0);
        }

        private void add(Kind k, long value, long srtt, long interval) {
            if (size == kinds.length) {
                kinds = Arrays.copyOf(kinds, size * 2);
                values = Arrays.copyOf(values, size * 2);
                srtts = Arrays.copyOf(srtts, size * 2);
                intervals = Arrays.copyOf(intervals, size * 2);
            }
            kinds[size] = k;
            values[size] = value;
            srtts[size] = srtt;
            intervals[size] = interval;
            size++;
        }
    }

    final String name;
    final long leaseMs;
    private final byte[] acquire;
    private final long leaseNanos;
    /** 0.8 × lease, rounded down to the nanosecond. */
    final long timeoutNanos;
    private final long releaseBoundNanos;
    private final long waitNanos;
    private final long connectTimeoutNanos;
    /** The server's address for messages: the ones given, then the one connected to. */
    private String address;
    final HeartbeatSchedule schedule;
    private final Wire.Decoder decoder = new Wire.Decoder();
    private final Actions actions = new Actions();

    private Phase phase = Phase.CONNECTING;
    private State state = State.CONNECTING;
    private boolean dialled;
    private long token;
    private Reason reason;
    private MonolockException failure;
    private LockLostException lost;

    /** The frame this event asks to write, handed out when the event ends. */
    private byte[] pendingSend;
    /** A request was asked for during this event: no frame of the same read can answer it. */
    private boolean sentThisEvent;
    private boolean inFlight;
    private long lastSend;
    /** A request was handed out and its write has not returned. */
    private boolean writePending;
    /** When that write was handed out. */
    private long writeStartedAt;
    /** When the newest successful write returned. */
    private long lastWritten;

    /** Send of the newest answered request + 0.8 × lease (rule 8). */
    private long deadline = NEVER;
    private long heartbeatDue = NEVER;
    private long connectDeadline = NEVER;
    private long waitDeadline = NEVER;
    /** Releasing: the release bound; lingering: the latest close. */
    private long closeBy = NEVER;

    /**
     * @param leaseNanos the lease as asked (the client's own timings), validated
     * @param leaseMs the lease as sent: whole milliseconds, a fraction rounded up
     * @param waitNanos {@link #WAIT_FOREVER}, 0 (a try-lock: busy when queued) or the longest wait
     */
    SessionStep(String address, String name, byte[] nameBytes, long leaseNanos, long leaseMs, long waitNanos,
            long connectTimeoutNanos) {
        this.address = address;
        this.name = name;
        this.leaseMs = leaseMs;
        this.acquire = Wire.acquire(leaseMs, nameBytes);
        this.leaseNanos = leaseNanos;
        this.timeoutNanos = leaseNanos * 4 / 5; // no overflow: a lease is at most 2^32 ms
        this.releaseBoundNanos = Math.min(leaseNanos, MAX_RELEASE_BOUND_NANOS);
        this.waitNanos = waitNanos;
        this.connectTimeoutNanos = connectTimeoutNanos;
        this.schedule = new HeartbeatSchedule(leaseNanos);
    }

    // --- events -------------------------------------------------------------

    /** dial: the attempt begins; the TCP connect (and the TLS handshake) must finish within the connect timeout. */
    Actions dial(long now) {
        begin();
        if (!dialled && phase == Phase.CONNECTING) {
            dialled = true;
            connectDeadline = now + connectTimeoutNanos;
            startWait(now);
        }
        return finish(now);
    }

    /** start: the connection is up (or, without a dial, the attempt begins with it): ACQUIRE goes out. */
    Actions start(long now) {
        begin();
        if (!dialled) {
            dialled = true;
            startWait(now);
        }
        takeDeadlines(now);
        if (phase == Phase.CONNECTING) {
            phase = Phase.LIVE;
            state = State.SENT;
            connectDeadline = NEVER;
            deadline = now + timeoutNanos; // the give-up clock runs from the ACQUIRE (rule 8)
            send(acquire, now);
        }
        return finish(now);
    }

    /** written: the write the step asked for returned; err null when it was done. */
    Actions written(long now, WriteError err, IOException cause) {
        begin();
        takeDeadlines(now);
        switch (phase) {
            case LIVE:
                if (err == null) {
                    wrote(now);
                } else if (err == WriteError.DEADLINE) {
                    giveUp(now);
                } else {
                    connectionGone(now, "write: " + describe(cause), cause);
                }
                break;
            case RELEASING:
                if (err != null) closeNow(true); // RELEASE could not be written: an RST
                break;
            case LINGERING:
                if (err == WriteError.BROKEN) closeNow(false); // the connection is gone
                else if (err == null) writePending = false;
                break;
            default:
                break;
        }
        return finish(now);
    }

    /** frame: the bytes of one read (rule 2: any split, any join); its frames are taken in order, all at now. */
    Actions frames(ByteBuffer in, long now) {
        begin();
        takeDeadlines(now);
        while (phase != Phase.CLOSED && decoder.next(in)) {
            if (!frame(now)) break; // an unknown type: the stream has no known layout after it
        }
        in.position(in.limit());
        return finish(now);
    }

    /** closed: the connection ended without an ERROR. */
    Actions closed(long now, Closed how, IOException cause) {
        begin();
        takeDeadlines(now);
        switch (phase) {
            case CONNECTING:
                if (how == Closed.TLS) {
                    end(Reason.TLS, tlsRefused(cause), LockLostException.Why.CLOSED, now);
                } else {
                    end(Reason.CONNECT, new ServerUnavailableException("monolock: cannot connect to " + address + ": "
                            + describe(cause) + "; is the server running there? A new attempt may succeed", cause, true),
                            LockLostException.Why.CLOSED, now);
                }
                closeNow(false);
                break;
            case LIVE:
                if (how == Closed.TLS) {
                    end(Reason.TLS, tlsRefused(cause), LockLostException.Why.CLOSED, now);
                    closeNow(false);
                } else {
                    connectionGone(now, how == Closed.EOF ? "the server closed the connection" : "read: " + describe(cause), cause);
                }
                break;
            case RELEASING:
                closeNow(how != Closed.EOF); // the server's close is the end of a release; a failure is an RST
                break;
            case LINGERING:
                closeNow(false); // the server has let go, or the connection is gone
                break;
            default:
                break;
        }
        return finish(now);
    }

    /**
     * stop: the caller released the lock, gave up the attempt, or its work
     * has stopped after a loss (rule 7). A live session sends RELEASE and
     * waits for the server's close; one given up on is aborted now.
     */
    Actions stop(long now) {
        begin();
        takeDeadlines(now);
        switch (phase) {
            case CONNECTING:
            case LINGERING:
                closeNow(true);
                break;
            case LIVE:
                startRelease(now);
                break;
            default:
                break;
        }
        return finish(now);
    }

    /** timer: the time of the last wake has come, or a timer fired early (the step checks the time itself). */
    Actions timer(long now) {
        begin();
        takeDeadlines(now);
        if (phase == Phase.LIVE && !inFlight && now >= heartbeatDue) send(HEARTBEAT, now);
        return finish(now);
    }

    /**
     * expired: the work's own check of the deadline (Lease.isValid) found it
     * passed before the timer did. The lock is given up now, whatever answer
     * may be on its way, so that the work and the client agree it is lost.
     */
    Actions expired(long now) {
        begin();
        takeDeadlines(now);
        if (phase == Phase.LIVE && state == State.HELD) giveUp(now);
        return finish(now);
    }

    /**
     * Not an event of the specification: the client itself is closing and
     * waits for no one, so every connection it still has is aborted now.
     */
    Actions abandon(long now) {
        begin();
        if (phase != Phase.CLOSED) closeNow(true);
        return finish(now);
    }

    // --- what the driver and the tests read -----------------------------------

    /** Ownership is confirmed at now: granted, not ended, within 0.8 × lease of the newest answered send. */
    boolean valid(long now) {
        return phase == Phase.LIVE && state == State.HELD && now < deadline;
    }

    /** The give-up deadline. */
    long deadline() {
        return deadline;
    }

    /** When the step wants its next timer event, or {@link #NEVER}. */
    long wakeAt() {
        switch (phase) {
            case CONNECTING:
                return Math.min(connectDeadline, waitDeadline);
            case LIVE:
                long t = Math.min(deadline, state == State.HELD ? NEVER : waitDeadline);
                return inFlight ? t : Math.min(t, heartbeatDue);
            case RELEASING:
            case LINGERING:
                return closeBy;
            default:
                return NEVER;
        }
    }

    State state() {
        return state;
    }

    boolean isClosed() {
        return phase == Phase.CLOSED;
    }

    boolean inFlight() {
        return inFlight;
    }

    long token() {
        return token;
    }

    /** Why the session ended, or null (a release, or not ended). */
    Reason reason() {
        return reason;
    }

    /** The attempt's failure before the grant, or null. */
    MonolockException failure() {
        return failure;
    }

    /** The loss of the held lock, or null. */
    LockLostException lost() {
        return lost;
    }

    /** The address connected to, for the messages from now on. */
    void connectedTo(String address) {
        this.address = address;
    }

    // --- the rules ------------------------------------------------------------

    private void begin() {
        actions.clear();
        sentThisEvent = false;
    }

    /** The event's sends, then its close or its wake. */
    private Actions finish(long now) {
        if (phase == Phase.LINGERING && now >= closeBy) closeNow(true);
        if (pendingSend != null) {
            actions.frame = pendingSend;
            actions.add(Actions.Kind.SEND, 0);
            writePending = true;
            writeStartedAt = lastSend;
            pendingSend = null;
        }
        // A step that closes returns no wake; after the close the step takes no more events.
        if (phase != Phase.CLOSED) actions.add(Actions.Kind.WAKE, wakeAt());
        return actions;
    }

    private void startWait(long now) {
        if (waitNanos > 0) waitDeadline = now + waitNanos;
    }

    /**
     * Every deadline passed at now, in time order (at the same time the
     * connect deadline, then the give-up, then the wait), as if the timer had
     * fired just before the event.
     */
    private void takeDeadlines(long now) {
        if ((phase == Phase.RELEASING || phase == Phase.LINGERING) && now >= closeBy) {
            closeNow(true);
            return;
        }
        if (phase == Phase.CONNECTING) {
            if (now >= connectDeadline && connectDeadline <= waitDeadline) {
                end(Reason.CONNECT, new ServerUnavailableException("monolock: cannot connect to " + address + " within "
                        + connectTimeoutNanos / 1_000_000 + " ms; is the server running there?", null, true),
                        LockLostException.Why.CLOSED, now);
                closeNow(true); // a half-made connection (a TLS handshake may be under way)
            } else if (now >= waitDeadline) {
                end(Reason.TIMEOUT, waitRanOut(), LockLostException.Why.CLOSED, now);
                closeNow(true);
            }
            return;
        }
        if (phase != Phase.LIVE) return;
        long wait = state == State.HELD ? NEVER : waitDeadline;
        if (now >= deadline && deadline <= wait) {
            giveUp(now);
        } else if (now >= wait) {
            if (state == State.WAITING) end(Reason.BUSY, stillBusy(), LockLostException.Why.CLOSED, now);
            else end(Reason.TIMEOUT, waitRanOut(), LockLostException.Why.CLOSED, now);
            startRelease(now);
        }
    }

    private void send(byte[] frame, long now) {
        pendingSend = frame;
        sentThisEvent = true;
        lastSend = now;
        inFlight = true;
        heartbeatDue = NEVER;
    }

    private void wrote(long now) {
        writePending = false;
        lastWritten = now;
    }

    /** One decoded frame; false for an unknown type, after which nothing of the read is decoded. */
    private boolean frame(long now) {
        int type = decoder.type;
        boolean known = type == Wire.TYPE_WAITING || type == Wire.TYPE_ACQUIRED || type == Wire.TYPE_ERROR;
        if (phase == Phase.RELEASING) {
            return known; // the end of a release: whatever comes is discarded (an old server's ERROR 0x13 included)
        }
        if (phase == Phase.LINGERING) {
            if (type == Wire.TYPE_ERROR) closeNow(false); // the server has let go
            return known;
        }
        if (type == Wire.TYPE_ERROR) {
            MonolockException e = decoder.code < Wire.FIRST_CLIENT_ERROR
                    ? new ServerUnavailableException(decoder.code, decoder.reason)
                    : new MonolockServerException(decoder.code, decoder.reason);
            end(Reason.SERVER, e, LockLostException.Why.SERVER, now);
            closeNow(false); // the server closes right after an ERROR: it closed first
            return true;
        }
        // A request asked for by an earlier frame of this read was not written
        // when the read's bytes arrived: nothing read with them answers it.
        boolean answerable = inFlight && !sentThisEvent;
        if (type == Wire.TYPE_WAITING && state != State.HELD && answerable) {
            boolean first = state == State.SENT;
            state = State.WAITING;
            if (first) actions.add(Actions.Kind.WAITING, 0);
            acknowledged(now);
            if (first && waitNanos == 0) {
                end(Reason.BUSY, new LockBusyException(name, "monolock: lock \"" + name
                        + "\" is busy: another client holds it (tryLock does not wait; use lock to wait in the queue)"),
                        LockLostException.Why.CLOSED, now);
                startRelease(now);
            }
            return true;
        }
        if (type == Wire.TYPE_ACQUIRED && state == State.SENT) {
            grant();
            acknowledged(now);
            return true;
        }
        if (type == Wire.TYPE_ACQUIRED && state == State.WAITING) {
            grant(); // the promotion push answers no request; a heartbeat in flight gets its own answer
            actions.add(Actions.Kind.VALID_UNTIL, deadline);
            return true;
        }
        if (type == Wire.TYPE_ACQUIRED && state == State.HELD && decoder.token == token && answerable) {
            acknowledged(now);
            return true;
        }
        String detail;
        if (type == Wire.TYPE_WAITING && state == State.HELD) {
            detail = "WAITING after ACQUIRED";
        } else if (type == Wire.TYPE_ACQUIRED && state == State.HELD && decoder.token != token) {
            detail = "token changed from " + Long.toUnsignedString(token) + " to " + Long.toUnsignedString(decoder.token);
        } else if (known && inFlight) {
            detail = "a second answer: " + (type == Wire.TYPE_WAITING ? "WAITING" : "ACQUIRED")
                    + " after the answer to the request in flight, before the next request was written";
        } else if (known) {
            detail = (type == Wire.TYPE_WAITING ? "WAITING" : "ACQUIRED") + " with no request in flight";
        } else {
            detail = "unknown frame type " + Wire.hex(type) + " from the server";
        }
        // A broken frame is treated like silence (rule 7): the work stops now, the close waits for it.
        giveUp(now, Reason.PROTOCOL, new ProtocolViolationException("monolock: protocol violation by the server at "
                + address + ": " + detail + "; this is a bug in the server or in something between it and this client"),
                LockLostException.Why.PROTOCOL);
        return known;
    }

    private void grant() {
        state = State.HELD;
        token = decoder.token;
        waitDeadline = NEVER;
        actions.add(Actions.Kind.GRANTED, token);
    }

    /**
     * The server has seen the request in flight: ownership is confirmed until
     * its send + 0.8 × lease, and the next heartbeat is due one interval after
     * that send, at once when this answer came later than that (rule 3).
     */
    private void acknowledged(long now) {
        long rtt = now - lastSend;
        schedule.observe(rtt);
        inFlight = false;
        deadline = lastSend + timeoutNanos;
        if (state == State.HELD) actions.add(Actions.Kind.VALID_UNTIL, deadline);
        long interval = schedule.intervalNanos();
        actions.add(Actions.Kind.ACK, rtt, schedule.smoothedRttNanos(), interval);
        heartbeatDue = lastSend + interval;
        if (now >= heartbeatDue) send(HEARTBEAT, now);
    }

    private void giveUp(long now) {
        giveUp(now, Reason.TIMEOUT, new ServerUnavailableException("monolock: no answer from the server at " + address
                + " within 0.8 × lease (" + timeoutNanos / 1_000_000.0 + " ms) of the newest answered request;"
                + " the network or the server stalled", null, true), LockLostException.Why.TIMEOUT);
    }

    /**
     * The client gives up on the server (silence, a violation): the work
     * stops now. Held, the connection stays open until the work has stopped
     * or the lease has passed since the last request's write, whichever comes
     * first (rule 7): the server's expiry, not this close, must hand the lock
     * on while the old work may still run. Not held, nothing runs: the
     * connection ends with this event (normally when the event is the
     * server's close, else abortively).
     */
    private void giveUp(long now, Reason r, MonolockException e, LockLostException.Why why) {
        boolean held = state == State.HELD;
        end(r, e, why, now);
        phase = Phase.LINGERING;
        closeBy = held ? (writePending ? writeStartedAt : lastWritten) + leaseNanos : now;
    }

    /** A failed read or write, or the server's end of the stream: the connection is gone, closed at once. */
    private void connectionGone(long now, String detail, IOException cause) {
        end(Reason.CLOSED, new ServerUnavailableException("monolock: connection to " + address + " lost: " + detail
                + "; a new attempt may succeed", cause, true), LockLostException.Why.CLOSED, now);
        closeNow(false);
    }

    /** Records why the session ended: the attempt failed before the grant, or the held lock is lost. */
    private void end(Reason r, MonolockException e, LockLostException.Why why, long now) {
        reason = r;
        heartbeatDue = NEVER;
        pendingSend = null; // a heartbeat asked for earlier in this event is not sent
        if (state == State.HELD) {
            lost = new LockLostException(name, why, e, now);
            actions.add(Actions.Kind.LOST, 0);
        } else {
            failure = e;
            actions.add(Actions.Kind.FAILED, 0);
        }
    }

    /** RELEASE goes out; the server's close ends the session, or at the bound an abortive close does. */
    private void startRelease(long now) {
        phase = Phase.RELEASING;
        heartbeatDue = NEVER;
        waitDeadline = NEVER;
        pendingSend = RELEASE;
        sentThisEvent = true;
        closeBy = now + releaseBoundNanos;
    }

    private void closeNow(boolean abort) {
        if (phase == Phase.CLOSED) return;
        phase = Phase.CLOSED;
        pendingSend = null;
        actions.add(abort ? Actions.Kind.ABORT : Actions.Kind.CLOSE, 0);
    }

    private MonolockException stillBusy() {
        return new LockBusyException(name, "monolock: lock \"" + name + "\" is still busy after waiting "
                + waitNanos / 1_000_000 + " ms; wait longer, or use lock to wait as long as it takes");
    }

    private MonolockException waitRanOut() {
        return new ServerUnavailableException("monolock: no answer from " + address + " for lock \"" + name
                + "\" within the wait of " + waitNanos / 1_000_000 + " ms", null, true);
    }

    private ServerUnavailableException tlsRefused(IOException cause) {
        return new ServerUnavailableException("monolock: the TLS handshake with " + address + " failed: "
                + describe(cause) + "; check the certificates on both sides (a new attempt meets the same refusal)", cause, false);
    }

    private static String describe(IOException e) {
        if (e == null) return "no detail";
        String m = e.getMessage();
        return m == null ? e.getClass().getSimpleName() : m;
    }
}
