package io.github.monolock;

import static io.github.monolock.SessionStep.NEVER;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.StringJoiner;
import org.junit.jupiter.api.Test;

/**
 * The session's rules with a clock of the test's own, to the nanosecond: no
 * sockets, no sleeps. Times are nanoseconds from an arbitrary T0. The step
 * scripts (StepScriptsTest) pin the printed actions; these check what the
 * driver reads besides them: the exceptions, the frames, the deadline.
 */
class SessionStepTest {
    private static final long T0 = 1_000_000_000_000L;
    private static final long MS = 1_000_000L;
    private static final byte[] HEARTBEAT = {0x02};
    private static final byte[] WAITING = {0x11};

    static byte[] acquired(long token) {
        return ByteBuffer.allocate(9).put((byte) 0x12).putLong(token).array();
    }

    static byte[] error(int code, String reason) {
        byte[] r = reason.getBytes(StandardCharsets.UTF_8);
        return ByteBuffer.allocate(3 + r.length).put((byte) 0x13).put((byte) code).put((byte) r.length).put(r).array();
    }

    static SessionStep newStep(long leaseMs, long waitNanos) {
        return new SessionStep("127.0.0.1:7070", "lock", "lock".getBytes(StandardCharsets.UTF_8), leaseMs * MS, leaseMs,
                waitNanos, 10_000 * MS);
    }

    /** Dialled and started at T0, its ACQUIRE written at T0. */
    static SessionStep step(long leaseMs, long waitNanos) {
        SessionStep s = newStep(leaseMs, waitNanos);
        assertEquals("WAKE", kinds(s.dial(T0)));
        SessionStep.Actions a = s.start(T0);
        assertEquals("SEND WAKE", kinds(a));
        assertEquals(8 + 4, a.frame().length);
        written(s, T0);
        return s;
    }

    static String written(SessionStep s, long now) {
        return kinds(s.written(now, null, null));
    }

    /** The kinds of one step's actions, in order: "GRANTED VALID_UNTIL ACK WAKE". */
    static String kinds(SessionStep.Actions a) {
        StringJoiner j = new StringJoiner(" ");
        for (int i = 0; i < a.size(); i++) j.add(a.kind(i).name());
        return j.toString();
    }

    static String feed(SessionStep s, byte[] b, long now) {
        return kinds(s.frames(ByteBuffer.wrap(b), now));
    }

    /** The frame a step asks to send, or null. */
    static byte[] sent(SessionStep.Actions a) {
        return a.has(SessionStep.Actions.Kind.SEND) ? a.frame() : null;
    }

    /** A 2 s lease granted at once, its ACQUIRE sent at T0 and answered at T0 + rtt. */
    static SessionStep held(long rtt) {
        SessionStep s = step(2000, SessionStep.WAIT_FOREVER);
        assertEquals("GRANTED VALID_UNTIL ACK WAKE", feed(s, acquired(7), T0 + rtt));
        return s;
    }

    @Test
    void acquireBytesAreTheGoldenOnes() {
        SessionStep s = new SessionStep("a:1", "nightly-import", "nightly-import".getBytes(StandardCharsets.UTF_8), 2000 * MS, 2000, -1, MS);
        s.dial(T0);
        assertArrayEquals(Golden.bytes("acquire"), sent(s.start(T0)));
        assertNull(sent(s.written(T0, null, null)), "a frame is handed out once");
    }

    @Test
    void givesUpAtExactlyFourFifthsOfTheLeaseAfterTheAnsweredSend() {
        SessionStep s = held(10 * MS);
        long deadline = T0 + 1600 * MS; // ACQUIRE sent at T0, lease 2000 ms
        assertEquals(deadline, s.deadline());
        assertEquals("SEND WAKE", kinds(s.timer(T0 + 500 * MS))); // a heartbeat, never answered
        written(s, T0 + 500 * MS);
        assertTrue(s.valid(deadline - 1));
        assertEquals("WAKE", kinds(s.timer(deadline - 1)));
        assertEquals(deadline, s.wakeAt(), "with a heartbeat in flight only the give-up is due");
        assertEquals("LOST WAKE", kinds(s.timer(deadline)), "lost at 0.8 × lease to the nanosecond, the connection kept");
        assertFalse(s.valid(deadline));
        assertEquals(LockLostException.Why.TIMEOUT, s.lost().why());
        assertEquals(deadline, s.lost().decidedAtNanos(), "the loss carries the time of the tick that decided it");
    }

    @Test
    void theDeadlineRunsFromTheNewestAnsweredSendNotItsAnswer() {
        SessionStep s = held(10 * MS);
        long hb = T0 + 500 * MS;
        assertArrayEquals(HEARTBEAT, sent(s.timer(hb)));
        written(s, hb);
        assertEquals("VALID_UNTIL ACK WAKE", feed(s, acquired(7), hb + 300 * MS));
        long deadline = hb + 1600 * MS;
        assertEquals(deadline, s.deadline());
        assertTrue(s.valid(deadline - 1));
        assertFalse(s.valid(deadline));
    }

    @Test
    void theGiveUpWhileQueuedFailsTheAttemptAndClosesAtOnce() {
        SessionStep s = step(2000, SessionStep.WAIT_FOREVER);
        assertEquals("WAKE", kinds(s.timer(T0 + 1600 * MS - 1)));
        assertEquals("FAILED ABORT", kinds(s.timer(T0 + 1600 * MS)));
        assertInstanceOf(ServerUnavailableException.class, s.failure());
        assertTrue(((ServerUnavailableException) s.failure()).isRetriable());
        assertEquals(SessionStep.Reason.TIMEOUT, s.reason());
    }

    @Test
    void heartbeatsEveryQuarterLeaseMeasuredFromSend() {
        SessionStep s = held(0);
        assertEquals(T0 + 500 * MS, s.wakeAt());
        assertEquals("WAKE", kinds(s.timer(T0 + 500 * MS - 1)));
        assertArrayEquals(HEARTBEAT, sent(s.timer(T0 + 500 * MS)));
    }

    @Test
    void oneRequestInFlight() {
        SessionStep s = held(0);
        assertArrayEquals(HEARTBEAT, sent(s.timer(T0 + 500 * MS)));
        written(s, T0 + 500 * MS);
        for (long t = T0 + 500 * MS; t < T0 + 1600 * MS; t += 50 * MS) {
            assertEquals("WAKE", kinds(s.timer(t)), "no second heartbeat while one is unanswered, at " + (t - T0));
        }
    }

    @Test
    void anAnswerLaterThanTheIntervalSendsTheNextHeartbeatAtOnce() {
        SessionStep s = held(0);
        long hb = T0 + 500 * MS;
        s.timer(hb);
        written(s, hb);
        // Answered 700 ms after its send: the next was due 500 − 2×srtt after it, long past.
        SessionStep.Actions a = s.frames(ByteBuffer.wrap(acquired(7)), hb + 700 * MS);
        assertEquals("VALID_UNTIL ACK SEND WAKE", kinds(a));
        assertArrayEquals(HEARTBEAT, a.frame());
    }

    @Test
    void theIntervalIsClampedToTheFloorAndTheBase() {
        HeartbeatSchedule h = new HeartbeatSchedule(2000 * MS);
        assertEquals(500 * MS, h.intervalNanos());
        h.observe(300 * MS); // 500 − 600 < floor
        assertEquals(100 * MS, h.intervalNanos());
        HeartbeatSchedule g = new HeartbeatSchedule(2000 * MS);
        g.observe(-5 * MS); // a clock step back is no negative RTT: the base, not more
        assertEquals(500 * MS, g.intervalNanos());
        HeartbeatSchedule small = new HeartbeatSchedule(200 * MS); // lease/4 = 50 ms is below 100 ms: floor = base
        small.observe(40 * MS);
        assertEquals(50 * MS, small.intervalNanos());
        HeartbeatSchedule e = new HeartbeatSchedule(2000 * MS);
        e.observe(100 * MS); // seeds: 500 − 200
        assertEquals(300 * MS, e.intervalNanos());
        e.observe(0); // srtt 80 ms: 500 − 160
        assertEquals(340 * MS, e.intervalNanos());
        HeartbeatSchedule odd = new HeartbeatSchedule(MS);
        assertEquals(250_000, odd.intervalNanos(), "lease/4 of 1 ms, exact");
        assertEquals(0xffff_ffffL * 250_000, new HeartbeatSchedule(0xffff_ffffL * MS).baseNanos);
    }

    @Test
    void theIntervalShortensByTwiceTheRttToTheNanosecond() {
        SessionStep s = held(100 * MS); // srtt seeded with 100 ms: interval 300 ms after the ACQUIRE's send
        assertEquals(T0 + 300 * MS, s.wakeAt());
        assertEquals("WAKE", kinds(s.timer(T0 + 300 * MS - 1)));
        assertEquals("SEND WAKE", kinds(s.timer(T0 + 300 * MS)));
    }

    @Test
    void thePushedPromotionAnswersNoRequest() {
        SessionStep s = step(2000, SessionStep.WAIT_FOREVER);
        assertEquals("WAITING ACK WAKE", feed(s, WAITING, T0 + MS));
        assertEquals(SessionStep.State.WAITING, s.state());
        assertEquals("SEND WAKE", kinds(s.timer(T0 + 500 * MS)));
        written(s, T0 + 500 * MS);
        assertEquals("GRANTED VALID_UNTIL WAKE", feed(s, acquired(-1L), T0 + 600 * MS));
        assertTrue(s.inFlight(), "the heartbeat in flight waits for its own answer");
        assertEquals(-1L, s.token());
        assertEquals(T0 + 1600 * MS, s.deadline(), "the push confirms nothing");
        assertEquals("VALID_UNTIL ACK WAKE", feed(s, acquired(-1L), T0 + 610 * MS));
        assertFalse(s.inFlight());
        assertEquals(T0 + 500 * MS + 1600 * MS, s.deadline());
    }

    @Test
    void framesSplitAnywhereAndJoined() {
        SessionStep s = step(2000, SessionStep.WAIT_FOREVER);
        byte[] both = new byte[10];
        both[0] = 0x11;
        System.arraycopy(acquired(0x8000_0000_0000_0001L), 0, both, 1, 9);
        StringJoiner all = new StringJoiner(" ");
        for (int i = 0; i < both.length; i++) all.add(feed(s, new byte[] {both[i]}, T0 + MS + i));
        assertTrue(all.toString().contains("GRANTED"), all.toString());
        assertEquals("9223372036854775809", Long.toUnsignedString(s.token()));

        SessionStep j = step(2000, SessionStep.WAIT_FOREVER);
        assertEquals("WAITING ACK GRANTED VALID_UNTIL WAKE", feed(j, both, T0 + MS), "WAITING and the push in one read");
    }

    @Test
    void tryLockFailsBusyAtTheFirstWaiting() {
        SessionStep s = step(2000, 0);
        SessionStep.Actions a = s.frames(ByteBuffer.wrap(WAITING), T0 + MS);
        assertEquals("WAITING ACK FAILED SEND WAKE", kinds(a), "leaves the queue with RELEASE");
        assertArrayEquals(new byte[] {0x03}, a.frame());
        assertInstanceOf(LockBusyException.class, s.failure());
        written(s, T0 + MS);
        assertEquals("CLOSE", kinds(s.closed(T0 + 2 * MS, SessionStep.Closed.EOF, null)), "the server closed first: a normal close");
    }

    @Test
    void aBoundedWaitEndsBusyAtItsEnd() {
        SessionStep s = newStep(2000, 1000 * MS);
        s.dial(T0);
        s.start(T0);
        written(s, T0);
        feed(s, WAITING, T0 + MS);
        s.timer(T0 + 500 * MS);
        written(s, T0 + 500 * MS); // written: the next WAITING answers it
        feed(s, WAITING, T0 + 501 * MS);
        assertFalse(kinds(s.timer(T0 + 1000 * MS - 1)).contains("FAILED"), "a nanosecond before the wait's end");
        SessionStep.Actions a = s.timer(T0 + 1000 * MS);
        assertEquals("FAILED SEND WAKE", kinds(a));
        assertArrayEquals(new byte[] {0x03}, a.frame());
        assertInstanceOf(LockBusyException.class, s.failure());
    }

    @Test
    void errorsByRange() {
        SessionStep a = step(2000, -1);
        assertEquals("FAILED CLOSE", feed(a, error(0x05, ""), T0 + MS));
        ServerUnavailableException u = (ServerUnavailableException) a.failure();
        assertEquals(5, u.code().getAsInt());
        assertTrue(u.isRetriable());

        for (int code : new int[] {0x10, 0x18, 0x7f, 0xff}) {
            SessionStep s = step(2000, -1);
            assertEquals("FAILED CLOSE", feed(s, error(code, "why"), T0 + MS));
            MonolockServerException e = (MonolockServerException) s.failure();
            assertEquals(code, e.code());
            assertEquals("why", e.reason());
        }
    }

    @Test
    void anErrorWhileHeldIsALossThatClosesAtOnce() {
        SessionStep s = held(MS);
        assertEquals("LOST CLOSE", feed(s, error(0x02, "closed by administrator"), T0 + 2 * MS));
        assertEquals(2, s.lost().code());
        assertEquals(LockLostException.Why.SERVER, s.lost().why());
    }

    @Test
    void aGiveUpKeepsTheConnectionUntilTheWorkStops() {
        SessionStep s = held(MS);
        long hb = T0 + 500 * MS;
        s.timer(hb); // never answered
        written(s, hb);
        assertEquals("LOST WAKE", kinds(s.timer(T0 + 1600 * MS)));
        assertEquals("WAKE", kinds(s.timer(T0 + 1700 * MS)), "nothing is sent after the give-up");
        assertEquals("ABORT", kinds(s.stop(T0 + 1800 * MS)), "the work stopped: close now, given up on: a reset");
        assertEquals(NEVER, s.wakeAt());
    }

    @Test
    void aGiveUpClosesAtTheLastWritePlusTheLeaseWhenTheWorkHangs() {
        SessionStep s = held(MS);
        long hb = T0 + 500 * MS;
        s.timer(hb);
        written(s, hb + MS); // the write returned a millisecond after the send
        s.timer(T0 + 1600 * MS);
        assertEquals(hb + MS + 2000 * MS, s.wakeAt());
        assertEquals("WAKE", kinds(s.timer(hb + MS + 2000 * MS - 1)));
        assertEquals("ABORT", kinds(s.timer(hb + MS + 2000 * MS)));
        assertEquals("", kinds(s.stop(hb + 2100 * MS)), "a release after the close is harmless");
    }

    @Test
    void anAnswerAtTheDeadlineDoesNotReviveTheLock() {
        SessionStep s = held(MS);
        s.timer(T0 + 500 * MS);
        written(s, T0 + 500 * MS);
        assertEquals("LOST WAKE", feed(s, acquired(7), T0 + 1600 * MS));
        assertFalse(s.valid(T0 + 1600 * MS));
        assertEquals("WAKE", feed(s, acquired(7), T0 + 1601 * MS));
    }

    @Test
    void theWorkSeeingTheDeadlineGivesTheLockUp() {
        SessionStep s = held(MS);
        assertEquals("LOST WAKE", kinds(s.expired(T0 + 1600 * MS)));
        assertEquals("WAKE", kinds(s.expired(T0 + 1601 * MS)));
    }

    @Test
    void endOfStreamIsALossThatClosesAtOnce() {
        SessionStep s = held(MS);
        assertEquals("LOST CLOSE", kinds(s.closed(T0 + 2 * MS, SessionStep.Closed.EOF, null)), "the server closed first: a normal close");
        assertEquals(LockLostException.Why.CLOSED, s.lost().why());
        SessionStep f = held(MS);
        assertEquals("LOST CLOSE", kinds(f.closed(T0 + 2 * MS, SessionStep.Closed.BROKEN, new IOException("reset"))),
                "a failed read: the connection is gone, closed at once");
    }

    @Test
    void protocolViolationsAreTreatedLikeSilence() {
        byte[][] bad = {{0x7e}, WAITING, acquired(8)};
        for (byte[] b : bad) {
            SessionStep s = held(MS);
            assertEquals("LOST WAKE", feed(s, b, T0 + 2 * MS), "kept open until the work stops");
            assertEquals(LockLostException.Why.PROTOCOL, s.lost().why());
            assertEquals("ABORT", kinds(s.stop(T0 + 3 * MS)));
        }
        SessionStep s = held(MS); // ACQUIRED with no request in flight
        assertEquals("LOST WAKE", feed(s, acquired(7), T0 + 2 * MS));
    }

    @Test
    void theConnectTimeout() {
        SessionStep s = newStep(2000, -1);
        s.dial(T0);
        assertEquals(T0 + 10_000 * MS, s.wakeAt());
        assertEquals("WAKE", kinds(s.timer(T0 + 10_000 * MS - 1)));
        assertEquals("FAILED ABORT", kinds(s.timer(T0 + 10_000 * MS)));
        assertEquals(SessionStep.Reason.CONNECT, s.reason());
        assertEquals("", kinds(s.start(T0 + 10_001 * MS)), "a connect after the timeout sends nothing");
    }

    @Test
    void aReleaseWhileQueuedSendsReleaseAndClosesAtTheServersClose() {
        SessionStep s = step(2000, -1);
        feed(s, WAITING, T0 + MS);
        assertArrayEquals(new byte[] {0x03}, sent(s.stop(T0 + 2 * MS)));
        assertEquals("WAKE", feed(s, acquired(9), T0 + 3 * MS), "a grant after the release is ignored");
        assertEquals("CLOSE", kinds(s.closed(T0 + 4 * MS, SessionStep.Closed.EOF, null)), "the server closed first: a normal close");
        assertNull(s.failure());
    }

    @Test
    void aReleaseWaitsForTheServersCloseAtMostTwoSecondsThenResets() {
        SessionStep s = step(60_000, -1);
        feed(s, acquired(7), T0 + MS);
        assertArrayEquals(new byte[] {0x03}, sent(s.stop(T0 + 10 * MS)));
        long bound = T0 + 10 * MS + 2000 * MS;
        assertEquals(bound, s.wakeAt());
        assertEquals("WAKE", kinds(s.timer(bound - 1)));
        assertEquals("ABORT", kinds(s.timer(bound)), "the server never closed: a reset");
        assertNull(s.lost(), "a release, not a loss");
        assertEquals("", kinds(s.stop(bound + 1)), "a second release is harmless");
    }

    @Test
    void aReleaseWaitsAtMostTheLeaseWhenItIsShorter() {
        SessionStep s = step(400, -1);
        feed(s, acquired(7), T0 + MS);
        s.stop(T0 + 10 * MS);
        assertEquals(T0 + 410 * MS, s.wakeAt());
    }

    @Test
    void anOldServersErrorAfterReleaseIsTheEndNotAnError() {
        SessionStep s = held(MS);
        s.stop(T0 + 10 * MS);
        assertEquals("WAKE", feed(s, error(0x13, "unknown message type"), T0 + 11 * MS));
        assertEquals("CLOSE", kinds(s.closed(T0 + 12 * MS, SessionStep.Closed.EOF, null)));
        assertNull(s.lost());
        SessionStep f = held(MS);
        f.stop(T0 + 10 * MS);
        assertEquals("ABORT", kinds(f.closed(T0 + 11 * MS, SessionStep.Closed.BROKEN, new IOException("reset"))),
                "a failed read after RELEASE: a reset");
        assertNull(f.lost());
    }

    @Test
    void theClientClosingAbandonsWithAResetAtOnce() {
        SessionStep s = held(MS);
        assertEquals("ABORT", kinds(s.abandon(T0 + 10 * MS)));
    }

    /** Queued, the heartbeat sent at 498 ms answered 600 ms later (past the interval) together with more. */
    private static SessionStep queuedWithALateAnswerThen(byte[] more, String[] actions) {
        SessionStep s = step(2000, -1);
        feed(s, WAITING, T0 + MS);
        assertEquals("SEND WAKE", kinds(s.timer(T0 + 498 * MS)));
        written(s, T0 + 498 * MS);
        byte[] read = new byte[1 + more.length];
        read[0] = 0x11;
        System.arraycopy(more, 0, read, 1, more.length);
        actions[0] = feed(s, read, T0 + 1098 * MS);
        return s;
    }

    @Test
    void thePushInTheReadOfALateAnswerIsAGrant() {
        String[] a = new String[1];
        SessionStep s = queuedWithALateAnswerThen(acquired(7), a);
        assertEquals("ACK GRANTED VALID_UNTIL SEND WAKE", a[0], "granted, and the late answer's heartbeat");
        assertNull(s.lost());
        assertTrue(s.valid(T0 + 1099 * MS));
    }

    @Test
    void anErrorInTheReadOfALateAnswerKeepsItsCode() {
        String[] a = new String[1];
        SessionStep s = queuedWithALateAnswerThen(error(0x01, ""), a);
        assertEquals("ACK FAILED CLOSE", a[0], "nothing is sent once the session ended");
        assertEquals(1, ((ServerUnavailableException) s.failure()).code().getAsInt());
    }

    @Test
    void aSecondAnswerInTheReadOfALateAnswerIsAViolation() {
        SessionStep s = held(MS);
        assertEquals("SEND WAKE", kinds(s.timer(T0 + 500 * MS)));
        written(s, T0 + 500 * MS);
        byte[] two = new byte[18];
        System.arraycopy(acquired(7), 0, two, 0, 9);
        System.arraycopy(acquired(7), 0, two, 9, 9);
        // The first answer comes past the interval and asks for a heartbeat;
        // the second cannot answer it.
        assertEquals("VALID_UNTIL ACK LOST WAKE", feed(s, two, T0 + 1100 * MS), "nothing is sent once the session ended");
        assertEquals(LockLostException.Why.PROTOCOL, s.lost().why());
    }

    @Test
    void theLongestLeaseDoesNotOverflow() {
        long max = 0xffff_ffffL;
        SessionStep s = step(max, -1);
        assertEquals(T0 + max * 800_000L, s.wakeAt(), "the give-up of ACQUIRE");
        assertEquals("GRANTED VALID_UNTIL ACK WAKE", feed(s, acquired(7), T0 + MS));
        assertEquals(T0 + max * 250_000L - 2 * MS, s.wakeAt(), "a heartbeat every lease/4 less 2 × RTT");
        assertTrue(s.valid(T0 + max * 800_000L - 1));
        assertEquals("SEND WAKE", kinds(s.stop(T0 + 2 * MS)));
        assertEquals(T0 + 2 * MS + 2000 * MS, s.wakeAt());
    }
}
