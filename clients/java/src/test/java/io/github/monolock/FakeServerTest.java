package io.github.monolock;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.time.Duration;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import javax.net.ssl.SSLContext;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The client against a scripted fake server over real sockets: stuck, silent, dead and misbehaving counterparts. */
@org.junit.jupiter.api.Timeout(60) // a hang is a failure, not a stuck build
class FakeServerTest {
    private ServerSocket listener;
    private final LinkedBlockingQueue<Socket> accepted = new LinkedBlockingQueue<>();
    private final java.util.List<Socket> all = new java.util.concurrent.CopyOnWriteArrayList<>();
    private MonolockClient client;

    @BeforeEach
    void listen() throws IOException {
        listener = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        Thread t = new Thread(() -> {
            try {
                while (true) {
                    Socket s = listener.accept();
                    s.setSoTimeout(10_000);
                    all.add(s);
                    accepted.add(s);
                }
            } catch (IOException closed) {
                // the test is over
            }
        }, "fake-accept");
        t.setDaemon(true);
        t.start();
        client = MonolockClient.builder("127.0.0.1:" + listener.getLocalPort()).build();
    }

    @AfterEach
    void close() throws IOException {
        client.close();
        listener.close();
        for (Socket s : all) s.close();
    }

    private Socket next() throws InterruptedException {
        Socket s = accepted.poll(10, TimeUnit.SECONDS);
        if (s == null) throw new AssertionError("the client did not connect");
        return s;
    }

    private static byte[] readAcquire(Socket s) throws IOException {
        DataInputStream in = new DataInputStream(s.getInputStream());
        byte[] head = new byte[8];
        in.readFully(head);
        byte[] all = new byte[8 + (((head[6] & 0xff) << 8) | (head[7] & 0xff))];
        System.arraycopy(head, 0, all, 0, 8);
        in.readFully(all, 8, all.length - 8);
        return all;
    }

    /** What drainHeartbeats returns for the client's reset (an abortive close, SO_LINGER 0). */
    private static final int RESET = -3;

    /** Reads heartbeats until none arrives within ms; returns the first thing that is not a heartbeat: -1 EOF, -2 silence, RESET. */
    private static int drainHeartbeats(Socket s, int ms, OutputStream answer, byte[] reply) throws IOException {
        s.setSoTimeout(ms);
        InputStream in = s.getInputStream();
        while (true) {
            int b;
            try {
                b = in.read();
            } catch (SocketTimeoutException e) {
                return -2;
            } catch (java.net.SocketException e) {
                if (String.valueOf(e.getMessage()).contains("reset")) return RESET;
                throw e;
            }
            if (b != 0x02) return b;
            if (answer != null) answer.write(reply);
        }
    }

    /**
     * Expects RELEASE (after heartbeats, answered with reply), closes first as
     * the server does, and checks that the client's close follows, orderly.
     */
    private static void releaseAndClose(Socket s, byte[] reply) throws IOException {
        assertEquals(0x03, drainHeartbeats(s, 10_000, reply == null ? null : s.getOutputStream(), reply), "RELEASE");
        s.shutdownOutput();
        assertEquals(-1, drainHeartbeats(s, 10_000, null, null), "the client's orderly close after the server's");
    }

    /** A lock granted token 42 by the fake server, and the fake's end of its connection. */
    private record Granted(Lease lease, Socket socket) {}

    private Granted granted(String name, Duration lease) throws Exception {
        Thread grant = grantNext();
        Lease l = client.lock(name, lease);
        grant.join();
        return new Granted(l, next());
    }

    /** What the fake server does on its side of a connection. */
    private interface Script {
        void run() throws IOException;
    }

    /** Closes l while script plays the server on a thread of its own; both must finish. */
    private static void closeWhileTheFakeRuns(Lease l, Script script) throws InterruptedException {
        Thread server = new Thread(() -> {
            try {
                script.run();
            } catch (IOException e) {
                throw new AssertionError(e);
            }
        });
        server.start();
        l.close();
        server.join(10_000);
        assertFalse(server.isAlive());
    }

    /** Grants the next connection token 42, then hands its socket back to the test (next()). */
    private Thread grantNext() {
        Thread t = new Thread(() -> {
            try {
                Socket s = next();
                readAcquire(s);
                accepted.add(s);
                s.getOutputStream().write(SessionStepTest.acquired(42));
            } catch (Exception e) {
                throw new AssertionError(e);
            }
        });
        t.start();
        return t;
    }

    @Test
    void aDeadServerIsUnavailableAndRetriable() throws Exception {
        // A port bound by a socket that never listens refuses every connect:
        // a port merely closed may be taken again by another test, or by
        // this connect itself (Linux's self-connect when the ephemeral port
        // picked equals the destination), as happened under load.
        try (Socket bound = new Socket()) {
            bound.bind(new InetSocketAddress("127.0.0.1", 0));
            int port = bound.getLocalPort();
            try (MonolockClient c = MonolockClient.builder("127.0.0.1:" + port).build()) {
                ServerUnavailableException e = assertThrows(ServerUnavailableException.class, () -> c.lock("x", Duration.ofSeconds(2)));
                assertTrue(e.isRetriable());
                assertTrue(e.getMessage().contains("cannot connect"), e.getMessage());
            }
        }
    }

    @Test
    void aServerThatNeverAnswersAcquireIsGivenUp() throws Exception {
        AtomicReference<Throwable> got = new AtomicReference<>();
        Thread t = new Thread(() -> got.set(assertThrows(ServerUnavailableException.class, () -> client.lock("x", Duration.ofMillis(400)))));
        t.start();
        Socket s = next();
        assertArrayEquals(Wire.acquire(400, Validate.name("x")), readAcquire(s));
        assertEquals(RESET, drainHeartbeats(s, 10_000, null, null), "nothing after ACQUIRE, then the reset of a give-up");
        t.join(10_000);
        assertTrue(got.get().getMessage().contains("0.8 × lease"), got.get().getMessage());
    }

    @Test
    void afterAGiveUpTheConnectionStaysOpenUntilTheWorkStops() throws Exception {
        Granted g = granted("silent", Duration.ofSeconds(2));
        Lease l = g.lease();
        Socket s = g.socket();
        l.lost().get(10, TimeUnit.SECONDS);
        // Lost at ~1.6 s; the close is due at the last send + 2 s. Right after
        // the loss the connection must still be open, with nothing more sent.
        assertEquals(-2, drainHeartbeats(s, 100, null, null), "open and silent after the give-up");
        l.close();
        assertEquals(RESET, drainHeartbeats(s, 10_000, null, null), "reset once the work stopped, no RELEASE");
    }

    @Test
    void anUnknownFrameIsALossAndTheCloseWaitsForTheWork() throws Exception {
        Granted g = granted("violation", Duration.ofSeconds(10));
        Lease l = g.lease();
        Socket s = g.socket();
        s.getOutputStream().write(0x7e);
        LockLostException lost = l.lost().get(10, TimeUnit.SECONDS);
        assertEquals(LockLostException.Why.PROTOCOL, lost.why());
        assertEquals(-2, drainHeartbeats(s, 200, null, null), "kept open while the work may run");
        l.close();
        assertEquals(RESET, drainHeartbeats(s, 10_000, null, null));
    }

    @Test
    void runRetriesServerConditionsAndReportsClientErrors() throws Exception {
        Thread script = new Thread(() -> {
            try {
                for (int i = 0; i < 2; i++) {
                    Socket s = next();
                    readAcquire(s);
                    s.getOutputStream().write(SessionStepTest.error(0x05, "busy server"));
                    s.close();
                }
                Socket s = next();
                readAcquire(s);
                s.getOutputStream().write(SessionStepTest.acquired(-2L));
            } catch (Exception e) {
                throw new AssertionError(e);
            }
        });
        script.start();
        AtomicReference<FencingToken> token = new AtomicReference<>();
        client.run("retry", Duration.ofSeconds(2), lease -> token.set(lease.token()));
        assertEquals("18446744073709551614", token.get().toString());
        script.join();

        Thread refuse = new Thread(() -> {
            try {
                Socket s = next();
                readAcquire(s);
                s.getOutputStream().write(SessionStepTest.error(0x18, "not authorized for lock: no"));
            } catch (Exception e) {
                throw new AssertionError(e);
            }
        });
        refuse.start();
        MonolockServerException e = assertThrows(MonolockServerException.class, () -> client.run("denied", Duration.ofSeconds(2), lease -> {}));
        assertEquals(0x18, e.code());
        assertEquals("not authorized for lock: no", e.reason());
        refuse.join();
    }

    @Test
    void aTlsServerStuckInTheHandshakeHitsTheConnectTimeout() throws Exception {
        SSLContext ctx = SSLContext.getInstance("TLS");
        ctx.init(null, null, null);
        try (MonolockClient c = MonolockClient.builder("127.0.0.1:" + listener.getLocalPort()).sslContext(ctx)
                .connectTimeout(Duration.ofMillis(300)).build()) {
                ServerUnavailableException e = assertThrows(ServerUnavailableException.class, () -> c.lock("x", Duration.ofSeconds(2)));
            assertTrue(e.getMessage().contains("within 300 ms"), e.getMessage());
        }
    }

    @Test
    void aConnectThatNeverCompletesHitsTheConnectTimeout() throws Exception {
        // A listener that never accepts: once its queue is full the kernel drops
        // further SYNs, and a connect stays pending.
        try (ServerSocket full = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            java.util.List<java.nio.channels.SocketChannel> fill = new java.util.ArrayList<>();
            try {
                for (int i = 0; i < 8; i++) {
                    java.nio.channels.SocketChannel ch = java.nio.channels.SocketChannel.open();
                    ch.configureBlocking(false);
                    ch.connect(full.getLocalSocketAddress());
                    fill.add(ch);
                }
                try (MonolockClient c = MonolockClient.builder("127.0.0.1:" + full.getLocalPort()).connectTimeout(Duration.ofMillis(300)).build()) {
                    ServerUnavailableException e = assertThrows(ServerUnavailableException.class, () -> c.lock("x", Duration.ofSeconds(2)));
                    assertTrue(e.getMessage().contains("within 300 ms"), e.getMessage());
                }
            } finally {
                for (java.nio.channels.SocketChannel ch : fill) ch.close();
            }
        }
    }

    @Test
    void interruptingAWaitLeavesTheQueue() throws Exception {
        Thread waiter = new Thread(() -> assertThrows(InterruptedException.class, () -> client.lock("q", Duration.ofSeconds(2))));
        waiter.start();
        Socket s = next();
        readAcquire(s);
        s.getOutputStream().write(0x11);
        waiter.interrupt();
        waiter.join(10_000);
        assertFalse(waiter.isAlive());
        releaseAndClose(s, new byte[] {0x11}); // out of the queue
    }

    @Test
    void releaseWaitsForTheServersClose() throws Exception {
        Granted g = granted("r", Duration.ofSeconds(2));
        Lease l = g.lease();
        Socket s = g.socket();
        closeWhileTheFakeRuns(l, () -> releaseAndClose(s, SessionStepTest.acquired(42)));
        assertFalse(l.isValid());
    }

    @Test
    void releaseResetsAServerThatNeverCloses() throws Exception {
        Granted g = granted("n", Duration.ofMillis(400));
        Lease l = g.lease();
        Socket s = g.socket();
        l.close(); // returns at the bound, min(lease, 2 s)
        assertEquals(0x03, drainHeartbeats(s, 10_000, s.getOutputStream(), SessionStepTest.acquired(42)));
        assertEquals(RESET, drainHeartbeats(s, 10_000, null, null), "RELEASE, then the reset at the bound");
    }

    @Test
    void anOldServersErrorAfterReleaseIsTheEnd() throws Exception {
        Granted g = granted("o", Duration.ofSeconds(2));
        Lease l = g.lease();
        Socket s = g.socket();
        closeWhileTheFakeRuns(l, () -> {
            assertEquals(0x03, drainHeartbeats(s, 10_000, s.getOutputStream(), SessionStepTest.acquired(42)));
            s.getOutputStream().write(SessionStepTest.error(0x13, "unknown message type 0x03"));
            s.shutdownOutput();
            assertEquals(-1, drainHeartbeats(s, 10_000, null, null));
        });
        assertTrue(l.lost().getNow(null) == null, "a release, not a loss");
    }

    @Test
    void thePushInTheReadOfALateAnswerGrantsTheLock() throws Exception {
        Thread script = new Thread(() -> {
            try {
                Socket s = next();
                readAcquire(s);
                s.getOutputStream().write(0x11);
                assertEquals(0x02, s.getInputStream().read());
                Thread.sleep(700); // the answer is late on purpose: past the interval
                byte[] both = new byte[10];
                both[0] = 0x11;
                System.arraycopy(SessionStepTest.acquired(9), 0, both, 1, 9);
                s.getOutputStream().write(both);
                releaseAndClose(s, SessionStepTest.acquired(9));
            } catch (Exception e) {
                throw new AssertionError(e);
            }
        });
        script.start();
        try (Lease l = client.lock("p", Duration.ofSeconds(2))) {
            assertEquals("9", l.token().toString());
        }
        script.join(10_000);
        assertFalse(script.isAlive());
    }
}
