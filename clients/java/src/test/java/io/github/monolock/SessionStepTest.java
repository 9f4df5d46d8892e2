package io.github.monolock;

import static io.github.monolock.SessionStep.ABORT;
import static io.github.monolock.SessionStep.CLOSE;
import static io.github.monolock.SessionStep.FAILED;
import static io.github.monolock.SessionStep.GRANTED;
import static io.github.monolock.SessionStep.LOST;
import static io.github.monolock.SessionStep.NEVER;
import static io.github.monolock.SessionStep.SEND;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/**
 * The session's rules with a clock of the test's own, to the nanosecond: no
 * sockets, no sleeps. Times are nanoseconds from an arbitrary T0.
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

    static SessionStep step(long leaseMs, long waitNanos) {
        SessionStep s = new SessionStep("127.0.0.1:7070", "lock", "lock".getBytes(StandardCharsets.UTF_8), leaseMs, waitNanos, 10_000 * MS);
        assertEquals(0, s.start(T0));
        assertEquals(SEND, s.connected(T0));
        assertEquals(8 + 4, s.takeSend().length);
        return s;
    }

    static int feed(SessionStep s, byte[] b, long now) {
        return s.receive(ByteBuffer.wrap(b), now);
    }

    /** A 2 s lease granted at once, its ACQUIRE sent at T0 and answered at T0 + rtt. */
    static SessionStep held(long rtt) {
        SessionStep s = step(2000, SessionStep.WAIT_FOREVER);
        assertEquals(GRANTED, feed(s, acquired(7), T0 + rtt));
        return s;
    }

    @Test
    void acquireBytesAreTheGoldenOnes() {
        SessionStep s = new SessionStep("a:1", "nightly-import", "nightly-import".getBytes(StandardCharsets.UTF_8), 2000, -1, MS);
        s.start(T0);
        assertEquals(SEND, s.connected(T0));
        assertArrayEquals(Golden.bytes("acquire"), s.takeSend());
        assertNull(s.takeSend(), "a frame is handed out once");
    }

    @Test
    void givesUpAtExactlyFourFifthsOfTheLeaseAfterTheAnsweredSend() {
        SessionStep s = held(10 * MS);
        long deadline = T0 + 1600 * MS; // ACQUIRE sent at T0, lease 2000 ms
        assertEquals(deadline, s.deadline());
        assertEquals(SEND, s.tick(T0 + 500 * MS)); // a heartbeat, never answered
        assertTrue(s.valid(deadline - 1));
        assertEquals(0, s.tick(deadline - 1));
        assertEquals(deadline, s.wakeAt(), "with a heartbeat in flight only the give-up is due");
        assertEquals(LOST, s.tick(deadline), "lost at 0.8 × lease to the nanosecond, the connection kept");
        assertFalse(s.valid(deadline));
        assertEquals(LockLostException.Why.TIMEOUT, s.lost().why());
        assertEquals(deadline, s.lost().decidedAtNanos(), "the loss carries the time of the tick that decided it");
    }

    @Test
    void theDeadlineRunsFromTheNewestAnsweredSendNotItsAnswer() {
        SessionStep s = held(10 * MS);
        long hb = T0 + 500 * MS;
        assertEquals(SEND, s.tick(hb));
        assertArrayEquals(HEARTBEAT, s.takeSend());
        assertEquals(0, feed(s, acquired(7), hb + 300 * MS));
        long deadline = hb + 1600 * MS;
        assertEquals(deadline, s.deadline());
        assertTrue(s.valid(deadline - 1));
        assertFalse(s.valid(deadline));
    }

    @Test
    void theGiveUpWhileQueuedFailsTheAttemptAndClosesAtOnce() {
        SessionStep s = step(2000, SessionStep.WAIT_FOREVER);
        assertEquals(0, s.tick(T0 + 1600 * MS - 1));
        assertEquals(FAILED | CLOSE | ABORT, s.tick(T0 + 1600 * MS));
        assertInstanceOf(ServerUnavailableException.class, s.failure());
        assertTrue(((ServerUnavailableException) s.failure()).isRetriable());
    }

    @Test
    void heartbeatsEveryQuarterLeaseMeasuredFromSend() {
        SessionStep s = held(0);
        assertEquals(T0 + 500 * MS, s.wakeAt());
        assertEquals(0, s.tick(T0 + 500 * MS - 1));
        assertEquals(SEND, s.tick(T0 + 500 * MS));
        assertArrayEquals(HEARTBEAT, s.takeSend());
    }

    @Test
    void oneRequestInFlight() {
        SessionStep s = held(0);
        assertEquals(SEND, s.tick(T0 + 500 * MS));
        s.takeSend();
        for (long t = T0 + 500 * MS; t < T0 + 1600 * MS; t += 50 * MS) {
            assertEquals(0, s.tick(t), "no second heartbeat while one is unanswered, at " + (t - T0));
        }
        assertNull(s.takeSend());
    }

    @Test
    void anAnswerLaterThanTheIntervalSendsTheNextHeartbeatAtOnce() {
        SessionStep s = held(0);
        long hb = T0 + 500 * MS;
        s.tick(hb);
        s.takeSend();
        // Answered 700 ms after its send: the next was due 500 − 2×srtt after it, long past.
        assertEquals(SEND, feed(s, acquired(7), hb + 700 * MS));
        assertArrayEquals(HEARTBEAT, s.takeSend());
    }

    @Test
    void theIntervalIsClampedToTheFloorAndTheBase() {
        HeartbeatSchedule h = new HeartbeatSchedule(2000);
        assertEquals(500 * MS, h.intervalNanos());
        h.observe(300 * MS); // 500 − 600 < floor
        assertEquals(100 * MS, h.intervalNanos());
        HeartbeatSchedule g = new HeartbeatSchedule(2000);
        g.observe(-5 * MS); // a clock step back is no negative RTT: the base, not more
        assertEquals(500 * MS, g.intervalNanos());
        HeartbeatSchedule small = new HeartbeatSchedule(200); // lease/4 = 50 ms is below 100 ms: floor = base
        small.observe(40 * MS);
        assertEquals(50 * MS, small.intervalNanos());
        HeartbeatSchedule e = new HeartbeatSchedule(2000);
        e.observe(100 * MS); // seeds: 500 − 200
        assertEquals(300 * MS, e.intervalNanos());
        e.observe(0); // srtt 80 ms: 500 − 160
        assertEquals(340 * MS, e.intervalNanos());
        HeartbeatSchedule odd = new HeartbeatSchedule(1);
        assertEquals(250_000, odd.intervalNanos(), "lease/4 of 1 ms, exact");
        assertEquals(0xffff_ffffL * 250_000, new HeartbeatSchedule(0xffff_ffffL).baseNanos);
    }

    @Test
    void theIntervalShortensByTwiceTheRttToTheNanosecond() {
        SessionStep s = held(100 * MS); // srtt seeded with 100 ms: interval 300 ms after the ACQUIRE's send
        assertEquals(T0 + 300 * MS, s.wakeAt());
        assertEquals(0, s.tick(T0 + 300 * MS - 1));
        assertEquals(SEND, s.tick(T0 + 300 * MS));
    }

    @Test
    void thePushedPromotionAnswersNoRequest() {
        SessionStep s = step(2000, SessionStep.WAIT_FOREVER);
        assertEquals(0, feed(s, WAITING, T0 + MS));
        assertEquals(SessionStep.State.WAITING, s.state());
        assertEquals(SEND, s.tick(T0 + 500 * MS));
        s.takeSend();
        assertEquals(GRANTED, feed(s, acquired(-1L), T0 + 600 * MS));
        assertTrue(s.inFlight(), "the heartbeat in flight waits for its own answer");
        assertEquals(-1L, s.token());
        assertEquals(T0 + 1600 * MS, s.deadline(), "the push confirms nothing");
        assertEquals(0, feed(s, acquired(-1L), T0 + 610 * MS));
        assertFalse(s.inFlight());
        assertEquals(T0 + 500 * MS + 1600 * MS, s.deadline());
    }

    @Test
    void framesSplitAnywhereAndJoined() {
        SessionStep s = step(2000, SessionStep.WAIT_FOREVER);
        byte[] both = new byte[10];
        both[0] = 0x11;
        System.arraycopy(acquired(0x8000_0000_0000_0001L), 0, both, 1, 9);
        int actions = 0;
        for (int i = 0; i < both.length; i++) actions |= feed(s, new byte[] {both[i]}, T0 + MS + i);
        assertEquals(GRANTED, actions & GRANTED);
        assertEquals("9223372036854775809", Long.toUnsignedString(s.token()));

        SessionStep j = step(2000, SessionStep.WAIT_FOREVER);
        assertEquals(GRANTED, feed(j, both, T0 + MS) & GRANTED, "WAITING and the push in one read");
    }

    @Test
    void tryLockFailsBusyAtTheFirstWaiting() {
        SessionStep s = step(2000, 0);
        assertEquals(FAILED | SEND, feed(s, WAITING, T0 + MS), "leaves the queue with RELEASE");
        assertArrayEquals(new byte[] {0x03}, s.takeSend());
        assertInstanceOf(LockBusyException.class, s.failure());
        assertEquals(CLOSE, s.endOfStream(T0 + 2 * MS), "the server closed first: a normal close");
    }

    @Test
    void aBoundedWaitEndsBusyAtItsEnd() {
        SessionStep s = new SessionStep("a:1", "lock", new byte[] {'l'}, 2000, 1000 * MS, 10_000 * MS);
        s.start(T0);
        s.connected(T0);
        s.takeSend();
        feed(s, WAITING, T0 + MS);
        s.tick(T0 + 500 * MS);
        s.takeSend(); // written: the next WAITING answers it
        feed(s, WAITING, T0 + 501 * MS);
        assertEquals(0, s.tick(T0 + 1000 * MS - 1) & FAILED);
        assertEquals(FAILED | SEND, s.tick(T0 + 1000 * MS));
        assertArrayEquals(new byte[] {0x03}, s.takeSend());
        assertInstanceOf(LockBusyException.class, s.failure());
    }

    @Test
    void errorsByRange() {
        SessionStep a = step(2000, -1);
        assertEquals(FAILED | CLOSE, feed(a, error(0x05, ""), T0 + MS));
        ServerUnavailableException u = (ServerUnavailableException) a.failure();
        assertEquals(5, u.code().getAsInt());
        assertTrue(u.isRetriable());

        for (int code : new int[] {0x10, 0x18, 0x7f, 0xff}) {
            SessionStep s = step(2000, -1);
            assertEquals(FAILED | CLOSE, feed(s, error(code, "why"), T0 + MS));
            MonolockServerException e = (MonolockServerException) s.failure();
            assertEquals(code, e.code());
            assertEquals("why", e.reason());
        }
    }

    @Test
    void anErrorWhileHeldIsALossThatClosesAtOnce() {
        SessionStep s = held(MS);
        assertEquals(LOST | CLOSE, feed(s, error(0x02, "closed by administrator"), T0 + 2 * MS));
        assertEquals(2, s.lost().code());
        assertEquals(LockLostException.Why.SERVER, s.lost().why());
    }

    @Test
    void aGiveUpKeepsTheConnectionUntilTheWorkStops() {
        SessionStep s = held(MS);
        long hb = T0 + 500 * MS;
        s.tick(hb); // never answered
        assertEquals(LOST, s.tick(T0 + 1600 * MS));
        assertEquals(0, s.tick(T0 + 1700 * MS));
        assertNull(s.takeSend(), "nothing is sent after the give-up");
        assertEquals(CLOSE | ABORT, s.release(T0 + 1800 * MS), "the work stopped: close now, given up on: a reset");
        assertEquals(NEVER, s.wakeAt());
    }

    @Test
    void aGiveUpClosesAtTheLastSendPlusTheLeaseWhenTheWorkHangs() {
        SessionStep s = held(MS);
        long hb = T0 + 500 * MS;
        s.tick(hb);
        s.tick(T0 + 1600 * MS);
        assertEquals(hb + 2000 * MS, s.wakeAt());
        assertEquals(0, s.tick(hb + 2000 * MS - 1));
        assertEquals(CLOSE | ABORT, s.tick(hb + 2000 * MS));
        assertEquals(0, s.release(hb + 2100 * MS), "a release after the close is harmless");
    }

    @Test
    void anAnswerAtTheDeadlineDoesNotReviveTheLock() {
        SessionStep s = held(MS);
        s.tick(T0 + 500 * MS);
        assertEquals(LOST, feed(s, acquired(7), T0 + 1600 * MS));
        assertFalse(s.valid(T0 + 1600 * MS));
        assertEquals(0, feed(s, acquired(7), T0 + 1601 * MS));
    }

    @Test
    void theWorkSeeingTheDeadlineGivesTheLockUp() {
        SessionStep s = held(MS);
        assertEquals(LOST, s.expired(T0 + 1600 * MS));
        assertEquals(0, s.expired(T0 + 1601 * MS));
    }

    @Test
    void endOfStreamIsALossThatClosesAtOnce() {
        SessionStep s = held(MS);
        assertEquals(LOST | CLOSE, s.endOfStream(T0 + 2 * MS), "the server closed first: a normal close");
        assertEquals(LockLostException.Why.CLOSED, s.lost().why());
        SessionStep f = held(MS);
        assertEquals(LOST | CLOSE | ABORT, f.connectionLost(T0 + 2 * MS, "reset", null, true), "a failure: a reset");
    }

    @Test
    void protocolViolationsAreTreatedLikeSilence() {
        byte[][] bad = {{0x7e}, WAITING, acquired(8)};
        for (byte[] b : bad) {
            SessionStep s = held(MS);
            assertEquals(LOST, feed(s, b, T0 + 2 * MS), "kept open until the work stops");
            assertEquals(LockLostException.Why.PROTOCOL, s.lost().why());
            assertEquals(CLOSE | ABORT, s.release(T0 + 3 * MS));
        }
        SessionStep s = held(MS); // ACQUIRED with no request in flight
        assertEquals(LOST, feed(s, acquired(7), T0 + 2 * MS));
    }

    @Test
    void theConnectTimeout() {
        SessionStep s = new SessionStep("a:1", "lock", new byte[] {'l'}, 2000, -1, 10_000 * MS);
        s.start(T0);
        assertEquals(T0 + 10_000 * MS, s.wakeAt());
        assertEquals(0, s.tick(T0 + 10_000 * MS - 1));
        assertEquals(FAILED | CLOSE | ABORT, s.tick(T0 + 10_000 * MS));
        assertEquals(0, s.connected(T0 + 10_001 * MS), "a connect after the timeout sends nothing");
    }

    @Test
    void aReleaseWhileQueuedSendsReleaseAndClosesAtTheServersClose() {
        SessionStep s = step(2000, -1);
        feed(s, WAITING, T0 + MS);
        assertEquals(SEND, s.release(T0 + 2 * MS));
        assertArrayEquals(new byte[] {0x03}, s.takeSend());
        assertEquals(0, feed(s, acquired(9), T0 + 3 * MS), "a grant after the release is ignored");
        assertEquals(CLOSE, s.endOfStream(T0 + 4 * MS), "the server closed first: a normal close");
        assertNull(s.failure());
    }

    @Test
    void aReleaseWaitsForTheServersCloseAtMostTwoSecondsThenResets() {
        SessionStep s = step(60_000, -1);
        feed(s, acquired(7), T0 + MS);
        assertEquals(SEND, s.release(T0 + 10 * MS));
        assertArrayEquals(new byte[] {0x03}, s.takeSend());
        long bound = T0 + 10 * MS + 2000 * MS;
        assertEquals(bound, s.wakeAt());
        assertEquals(0, s.tick(bound - 1));
        assertEquals(CLOSE | ABORT, s.tick(bound), "the server never closed: a reset");
        assertNull(s.lost(), "a release, not a loss");
        assertEquals(0, s.release(bound + 1), "a second release is harmless");
    }

    @Test
    void aReleaseWaitsAtMostTheLeaseWhenItIsShorter() {
        SessionStep s = step(400, -1);
        feed(s, acquired(7), T0 + MS);
        s.release(T0 + 10 * MS);
        assertEquals(T0 + 410 * MS, s.wakeAt());
    }

    @Test
    void anOldServersErrorAfterReleaseIsTheEndNotAnError() {
        SessionStep s = held(MS);
        s.release(T0 + 10 * MS);
        assertEquals(0, feed(s, error(0x13, "unknown message type"), T0 + 11 * MS));
        assertEquals(CLOSE, s.endOfStream(T0 + 12 * MS));
        assertNull(s.lost());
        SessionStep f = held(MS);
        f.release(T0 + 10 * MS);
        assertEquals(CLOSE | ABORT, f.connectionLost(T0 + 11 * MS, "reset", null, true), "a failed read after RELEASE: a reset");
        assertNull(f.lost());
    }

    @Test
    void theClientClosingAbandonsWithAResetAtOnce() {
        SessionStep s = held(MS);
        assertEquals(CLOSE | ABORT, s.abandon(T0 + 10 * MS));
        assertNull(s.takeSend());
    }

    /** Queued, the heartbeat sent at 498 ms answered 600 ms later (past the interval) together with more. */
    private static SessionStep queuedWithALateAnswerThen(byte[] more, int[] actions) {
        SessionStep s = step(2000, -1);
        feed(s, WAITING, T0 + MS);
        assertEquals(SEND, s.tick(T0 + 498 * MS));
        s.takeSend();
        byte[] read = new byte[1 + more.length];
        read[0] = 0x11;
        System.arraycopy(more, 0, read, 1, more.length);
        actions[0] = feed(s, read, T0 + 1098 * MS);
        return s;
    }

    @Test
    void thePushInTheReadOfALateAnswerIsAGrant() {
        int[] a = new int[1];
        SessionStep s = queuedWithALateAnswerThen(acquired(7), a);
        assertEquals(GRANTED | SEND, a[0], "granted, and the late answer's heartbeat");
        assertNull(s.lost());
        assertTrue(s.valid(T0 + 1099 * MS));
    }

    @Test
    void anErrorInTheReadOfALateAnswerKeepsItsCode() {
        int[] a = new int[1];
        SessionStep s = queuedWithALateAnswerThen(error(0x01, ""), a);
        assertEquals(FAILED | CLOSE, a[0]);
        assertNull(s.takeSend(), "nothing is sent once the session ended");
        assertEquals(1, ((ServerUnavailableException) s.failure()).code().getAsInt());
    }

    @Test
    void aSecondAnswerInTheReadOfALateAnswerIsAViolation() {
        SessionStep s = held(MS);
        assertEquals(SEND, s.tick(T0 + 500 * MS));
        s.takeSend();
        byte[] two = new byte[18];
        System.arraycopy(acquired(7), 0, two, 0, 9);
        System.arraycopy(acquired(7), 0, two, 9, 9);
        // The first answer comes past the interval and queues a heartbeat; the
        // second cannot answer it.
        assertEquals(LOST, feed(s, two, T0 + 1100 * MS));
        assertEquals(LockLostException.Why.PROTOCOL, s.lost().why());
        assertNull(s.takeSend(), "nothing is sent once the session ended");
    }

    @Test
    void theLongestLeaseDoesNotOverflow() {
        long max = 0xffff_ffffL;
        SessionStep s = step(max, -1);
        assertEquals(T0 + max * 800_000L, s.wakeAt(), "the give-up of ACQUIRE");
        assertEquals(GRANTED, feed(s, acquired(7), T0 + MS));
        assertEquals(T0 + max * 250_000L - 2 * MS, s.wakeAt(), "a heartbeat every lease/4 less 2 × RTT");
        assertTrue(s.valid(T0 + max * 800_000L - 1));
        assertEquals(SEND, s.release(T0 + 2 * MS));
        assertEquals(T0 + 2 * MS + 2000 * MS, s.wakeAt());
    }
}
