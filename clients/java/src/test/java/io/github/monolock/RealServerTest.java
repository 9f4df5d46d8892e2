package io.github.monolock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The client against the real server over real sockets. */
@org.junit.jupiter.api.Timeout(60) // a hang is a failure, not a stuck build
class RealServerTest {
    private static final Duration LEASE = Duration.ofSeconds(2);
    private RealServer server;
    private MonolockClient client;

    @BeforeEach
    void start() throws Exception {
        server = new RealServer();
        client = server.client();
    }

    @AfterEach
    void stop() {
        if (client != null) client.close();
        if (server != null) server.close(); // null when the server binary is missing: the tests skip
    }

    @Test
    void waitersArePromotedInArrivalOrderWithGrowingTokens() throws Exception {
        Lease holder = client.lock("fifo", LEASE);
        List<CompletableFuture<Lease>> waiters = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            waiters.add(client.lockAsync("fifo", LEASE));
            server.awaitWaiters("fifo", i + 1);
        }
        assertTrue(waiters.get(1).cancel(false), "the middle waiter leaves the queue");
        server.awaitWaiters("fifo", 2);
        holder.close();
        Lease first = RealServer.await(waiters.get(0));
        assertTrue(first.token().isAfter(holder.token()));
        assertFalse(waiters.get(2).isDone(), "the third waits behind the first");
        first.close();
        Lease third = RealServer.await(waiters.get(2));
        assertTrue(third.token().isAfter(first.token()));
        assertTrue(third.isValid());
        third.close();
        assertFalse(third.isValid());
    }

    @Test
    void releaseLeavesNoTimeWaitOnTheClientAndPromotesTheWaiter() throws Exception {
        Lease holder = client.lock("tw", LEASE);
        CompletableFuture<Lease> waiter = client.lockAsync("tw", LEASE);
        server.awaitWaiters("tw", 1);
        int port = RealServer.localPort(holder);
        holder.close(); // returns once the server has closed
        assertFalse(RealServer.timeWait(port, server.port()), "a TIME_WAIT on the client's port " + port);
        try (Lease next = RealServer.await(waiter)) {
            assertTrue(next.token().isAfter(holder.token()));
        }
    }

    @Test
    void theLongestLeaseIsHeldAndReleased() throws Exception {
        Duration max = Duration.ofMillis(0xffff_ffffL);
        try (Lease l = client.lock("max", max)) {
            assertEquals(max, l.lease());
            assertTrue(l.isValid());
        }
        assertTrue(client.tryLock("max", LEASE).isPresent(), "released");
    }

    @Test
    void tryLockIsEmptyWhileHeld() throws Exception {
        try (Lease held = client.lock("busy", LEASE)) {
            assertEquals(Optional.empty(), client.tryLock("busy", LEASE));
            assertEquals(Optional.empty(), client.tryLock("busy", LEASE, Duration.ofMillis(50)));
            LockBusyException e = assertThrows(LockBusyException.class, () -> client.lock("busy", LEASE, Duration.ofMillis(50)));
            assertEquals("busy", e.lockName());
            assertTrue(held.isValid());
        }
        try (Lease again = client.tryLock("busy", LEASE).orElseThrow()) {
            assertTrue(again.isValid());
        }
    }

    @Test
    void aLeaseBelongsToTheObjectNotTheThread() throws Exception {
        Lease held = client.lock("owner", LEASE);
        CompletableFuture<Lease> next = client.lockAsync("owner", LEASE);
        server.awaitWaiters("owner", 1);
        Thread other = new Thread(held::close);
        other.start();
        other.join();
        try (Lease l = RealServer.await(next)) {
            assertTrue(l.token().isAfter(held.token()));
        }
    }

    @Test
    void heartbeatsKeepTheLockLongerThanItsLease() throws Exception {
        try (Lease l = client.lock("long", LEASE)) {
            // Longer than the lease: only heartbeats keep it. A 2 s lease gives
            // up after 1.6 s without an answer, so scheduling delays cannot lose it.
            assertFalse(l.lost().isDone());
            Thread.sleep(2500);
            assertTrue(l.isValid());
            assertFalse(l.lost().isDone());
        }
    }

    @Test
    void aForcedReleaseIsALossWithCode2() throws Exception {
        Lease l = client.lock("forced", LEASE);
        server.forceRelease("forced");
        LockLostException lost = l.lost().get(10, TimeUnit.SECONDS);
        assertEquals(2, lost.code());
        assertEquals(LockLostException.Why.SERVER, lost.why());
        assertFalse(l.isValid());
        l.close();
        try (Lease next = client.lock("forced", LEASE)) {
            assertTrue(next.token().isAfter(l.token()));
        }
    }

    @Test
    void runInterruptsTheWorkAtTheLoss() throws Exception {
        CountDownLatch started = new CountDownLatch(1);
        AtomicBoolean interrupted = new AtomicBoolean();
        Thread t = new Thread(() -> {
            try {
                client.run("run-loss", LEASE, lease -> {
                    started.countDown();
                    try {
                        new CountDownLatch(1).await(); // the work, until interrupted
                    } catch (InterruptedException e) {
                        interrupted.set(true);
                    }
                });
            } catch (LockLostException e) {
                if (e.code() != 2) throw e;
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
        });
        t.start();
        assertTrue(started.await(20, TimeUnit.SECONDS));
        server.forceRelease("run-loss");
        t.join(20_000);
        assertFalse(t.isAlive());
        assertTrue(interrupted.get(), "the loss interrupted the work");
    }

    @Test
    void runReturnsTheWorksExceptionAndReleases() throws Exception {
        IllegalStateException e = assertThrows(IllegalStateException.class,
                () -> client.run("run-fail", LEASE, lease -> { throw new IllegalStateException("work failed"); }));
        assertEquals("work failed", e.getMessage());
        try (Lease l = client.tryLock("run-fail", LEASE).orElseThrow()) {
            assertTrue(l.isValid(), "run released the lock");
        }
    }

    @Test
    void manyWaitingLeasesShareOneThread() throws Exception {
        try (Lease held = client.lock("many", LEASE)) {
            List<CompletableFuture<Lease>> waiting = new ArrayList<>();
            for (int i = 0; i < 200; i++) waiting.add(client.lockAsync("many", LEASE));
            server.awaitWaiters("many", 200);
            long io = Thread.getAllStackTraces().keySet().stream().filter(x -> x.getName().startsWith("monolock-io")).count();
            assertEquals(1, io, "one I/O thread for every connection of a client");
            for (CompletableFuture<Lease> f : waiting) f.cancel(false);
            server.awaitWaiters("many", 0);
            assertTrue(held.isValid());
        }
    }

    @Test
    void badInputIsRefusedBeforeConnecting() {
        assertThrows(IllegalArgumentException.class, () -> client.lock("", LEASE));
        assertThrows(IllegalArgumentException.class, () -> client.lock("x", Duration.ZERO));
        assertThrows(IllegalArgumentException.class, () -> MonolockClient.builder("no-port"));
    }

    @Test
    void closingTheClientReleasesItsLocks() throws Exception {
        MonolockClient other = server.client();
        Lease l = other.lock("client-close", LEASE);
        CompletableFuture<Lease> next = client.lockAsync("client-close", LEASE);
        server.awaitWaiters("client-close", 1);
        other.close();
        try (Lease n = RealServer.await(next)) {
            assertTrue(n.token().isAfter(l.token()));
        }
        l.close(); // harmless after the client closed
    }
}
