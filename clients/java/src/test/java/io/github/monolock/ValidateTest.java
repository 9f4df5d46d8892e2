package io.github.monolock;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.function.LongUnaryOperator;
import org.junit.jupiter.api.Test;

/** The checks made before connecting, and the retry waits. */
class ValidateTest {
    @Test
    void names() {
        assertEquals(255, Validate.name("a".repeat(255)).length);
        assertArrayEquals(new byte[] {(byte) 0xc3, (byte) 0x9f}, Validate.name("ß"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> Validate.name("")).getMessage().contains("empty lock name"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> Validate.name("a".repeat(256))).getMessage().contains("too long: 256 bytes"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> Validate.name("ß".repeat(128))).getMessage().contains("256 bytes"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> Validate.name("a\udc80")).getMessage().contains("not valid UTF-8"));
        assertThrows(IllegalArgumentException.class, () -> Validate.name(null));
    }

    @Test
    void leasesRoundUpToWholeMilliseconds() {
        assertEquals(1501, Validate.leaseMs(Duration.ofNanos(1_500_250_000)));
        assertEquals(300, Validate.leaseMs(Duration.ofMillis(300)));
        assertEquals(1, Validate.leaseMs(Duration.ofMillis(1)));
        // Below 1 ms is invalid input, never sent as 1 ms (docs/protocol.md, Outcomes).
        assertThrows(IllegalArgumentException.class, () -> Validate.leaseMs(Duration.ofNanos(1)));
        assertThrows(IllegalArgumentException.class, () -> Validate.leaseMs(Duration.ofNanos(999_999)));
        assertEquals(0xffff_ffffL, Validate.leaseMs(Duration.ofMillis(0xffff_ffffL)));
        assertThrows(IllegalArgumentException.class, () -> Validate.leaseMs(Duration.ZERO));
        assertThrows(IllegalArgumentException.class, () -> Validate.leaseMs(Duration.ofMillis(-1)));
        assertThrows(IllegalArgumentException.class, () -> Validate.leaseMs(Duration.ofMillis(0xffff_ffffL).plusNanos(1)));
        assertThrows(IllegalArgumentException.class, () -> Validate.leaseMs(null));
    }

    @Test
    void addresses() {
        assertArrayEquals(new String[] {"127.0.0.1", "7070"}, Validate.address("127.0.0.1:7070"));
        assertArrayEquals(new String[] {"::1", "7070"}, Validate.address("[::1]:7070"));
        for (String bad : new String[] {"127.0.0.1", ":7070", "h:0", "h:65536", "::1:7070", "h:x"}) {
            assertThrows(IllegalArgumentException.class, () -> Validate.address(bad), bad);
        }
    }

    @Test
    void backoffDoublesWithEqualJitterUpToFiveSeconds() {
        Backoff low = new Backoff(n -> 0);
        long[] want = {50, 100, 200, 400, 800, 1600, 2500, 2500};
        for (long w : want) assertEquals(w * 1_000_000, low.next());
        LongUnaryOperator top = n -> n - 1;
        Backoff high = new Backoff(top);
        assertEquals(100_000_000, high.next());
        assertEquals(200_000_000, high.next());
    }

    @Test
    void theShutdownWaitIsAtMostAQuarterLeaseAndOneSecond() {
        Backoff top = new Backoff(n -> n - 1);
        assertEquals(500_000_000, top.shutdownJitter(2_000_000_000L));
        assertEquals(1_000_000_000, top.shutdownJitter(60_000_000_000L));
        assertEquals(999_999_999, top.shutdownJitter(3_999_999_996L), "lease/4 of the lease as asked, to the nanosecond");
        assertEquals(0, new Backoff(n -> 0).shutdownJitter(2_000_000_000L));
    }

    @Test
    void theTimerHeapKeepsTheEarliestFirst() {
        TimerHeap h = new TimerHeap();
        Connection[] cs = new Connection[200];
        java.util.Random r = new java.util.Random(1);
        for (int i = 0; i < cs.length; i++) {
            cs[i] = new Connection(null, null, null, null);
            h.set(cs[i], r.nextInt(1000));
        }
        for (int i = 0; i < 100; i++) h.set(cs[r.nextInt(cs.length)], r.nextInt(1000)); // re-armed
        for (int i = 0; i < 50; i++) h.remove(cs[i]);
        long last = -1;
        int n = 0;
        while (h.size() > 0) {
            Connection c = h.peek();
            assertTrue(c.wakeAt >= last);
            last = c.wakeAt;
            h.remove(c);
            n++;
        }
        assertEquals(150, n);
    }
}
