package io.github.monolock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.DataInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.UnknownHostException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * A client given several addresses (a list, or a name that resolves to
 * several): each connection starts from the address that worked last and
 * tries the others in order when a connect is refused, within the one
 * connect deadline.
 */
@org.junit.jupiter.api.Timeout(60) // a hang is a failure, not a stuck build
class SeveralAddressesTest {
    private static final Duration LEASE = Duration.ofSeconds(10);
    private final List<AutoCloseable> closers = new ArrayList<>();

    @AfterEach
    void closeAll() throws Exception {
        for (int i = closers.size() - 1; i >= 0; i--) closers.get(i).close();
    }

    private <T extends AutoCloseable> T closing(T c) {
        closers.add(c);
        return c;
    }

    private static InetAddress ip(String text) {
        try {
            return InetAddress.getByName(text); // a literal: no lookup
        } catch (UnknownHostException e) {
            throw new AssertionError(e);
        }
    }

    private static Addresses.Resolver resolver(Map<String, List<String>> names) {
        return host -> {
            List<String> ips = names.get(host);
            if (ips == null) throw new UnknownHostException(host + ": no such name in the test's resolver");
            return ips.stream().map(SeveralAddressesTest::ip).toArray(InetAddress[]::new);
        };
    }

    private static List<String> order(Addresses a) {
        List<String> out = new ArrayList<>();
        for (Addresses.Candidate c : a.candidates()) out.add(c.toString());
        return out;
    }

    @Test
    void everyResolvedAddressIsACandidateAndTheOneThatWorkedGoesFirst() {
        Addresses a = new Addresses(List.of("primary.test:7070", "10.0.0.9:7071"),
                resolver(Map.of("primary.test", List.of("10.0.0.1", "10.0.0.2"), "10.0.0.9", List.of("10.0.0.9"))));
        assertEquals(List.of("primary.test (10.0.0.1:7070)", "primary.test (10.0.0.2:7070)", "10.0.0.9:7071"), order(a));
        a.worked(new InetSocketAddress(ip("10.0.0.9"), 7071));
        assertEquals(List.of("10.0.0.9:7071", "primary.test (10.0.0.1:7070)", "primary.test (10.0.0.2:7070)"), order(a),
                "the last that worked first, the others in the order given");
        a.worked(new InetSocketAddress(ip("10.0.0.2"), 7070));
        assertEquals(List.of("primary.test (10.0.0.2:7070)", "primary.test (10.0.0.1:7070)", "10.0.0.9:7071"), order(a));
        a.worked(new InetSocketAddress(ip("10.0.0.5"), 7070)); // no longer among the names' addresses
        assertEquals(List.of("primary.test (10.0.0.1:7070)", "primary.test (10.0.0.2:7070)", "10.0.0.9:7071"), order(a));
    }

    @Test
    void aNameThatDoesNotResolveIsSkippedAndNoneIsUnavailable() {
        Addresses a = new Addresses(List.of("gone.test:1", "10.0.0.1:2"), resolver(Map.of("10.0.0.1", List.of("10.0.0.1"))));
        assertEquals(List.of("10.0.0.1:2"), order(a));
        Addresses none = new Addresses(List.of("gone.test:1"), resolver(Map.of()));
        ServerUnavailableException e = assertThrows(ServerUnavailableException.class, none::candidates);
        assertTrue(e.isRetriable(), "a name may resolve at the next attempt");
        assertTrue(e.getMessage().contains("cannot resolve gone.test"), e.getMessage());
    }

    @Test
    void theBuilderRefusesAnEmptyListAndABadAddress() {
        assertThrows(IllegalArgumentException.class, () -> MonolockClient.builder(List.of()));
        assertThrows(IllegalArgumentException.class, () -> MonolockClient.builder(List.of("127.0.0.1:1", "nohost")));
        assertThrows(IllegalArgumentException.class, () -> MonolockClient.builder((List<String>) null));
        assertThrows(IllegalArgumentException.class, () -> MonolockClient.builder((String) null));
        try (MonolockClient c = MonolockClient.builder(List.of("127.0.0.1:1", "[::1]:2")).build()) {
            assertEquals("127.0.0.1:1", c.address());
            assertEquals(List.of("127.0.0.1:1", "[::1]:2"), c.addresses());
        }
    }

    /**
     * A port on 127.0.0.1 that refuses every connect: bound by a socket that
     * never listens, for the rest of the test (a port merely closed may be
     * taken again, or picked by the connect itself as its own ephemeral port).
     */
    private int refusingPort() throws IOException {
        Socket bound = closing(new Socket());
        bound.bind(new InetSocketAddress(ip("127.0.0.1"), 0));
        return bound.getLocalPort();
    }

    private ServerSocket listen(String host, int port) throws IOException {
        ServerSocket s = new ServerSocket();
        s.setReuseAddress(true);
        s.bind(new InetSocketAddress(ip(host), port));
        return closing(s);
    }

    /** Accepts one connection, reads its ACQUIRE and grants it token 42; the fake's end of the connection. */
    private Socket acceptAndGrant(ServerSocket fake) throws IOException {
        fake.setSoTimeout(10_000);
        Socket s = closing(fake.accept());
        s.setSoTimeout(10_000);
        DataInputStream in = new DataInputStream(s.getInputStream());
        byte[] head = new byte[8];
        in.readFully(head);
        in.readFully(new byte[((head[6] & 0xff) << 8) | (head[7] & 0xff)]);
        assertEquals(0x01, head[0], "ACQUIRE");
        s.getOutputStream().write(SessionStepTest.acquired(42));
        return s;
    }

    /** The server shutting down: ERROR 0x01, then the close. */
    private static void shutDown(Socket s) throws IOException {
        OutputStream out = s.getOutputStream();
        out.write(SessionStepTest.error(0x01, "server shutting down"));
        s.close();
    }

    @Test
    void aListStartsFromTheAddressThatWorkedLast() throws Exception {
        Socket holder = closing(new Socket());
        holder.bind(new InetSocketAddress(ip("127.0.0.1"), 0)); // refuses connects until it listens below
        int first = holder.getLocalPort();
        ServerSocket second = listen("127.0.0.1", 0);
        MonolockClient client = closing(MonolockClient.builder(List.of("127.0.0.1:" + first,
                "127.0.0.1:" + second.getLocalPort())).build());

        // The first address refuses: the second grants, within the same attempt.
        CompletableFuture<Lease> f = client.lockAsync("several", LEASE);
        Socket conn = acceptAndGrant(second);
        Lease l = f.get(10, TimeUnit.SECONDS);
        assertEquals(42, l.token().toLong());

        // The second shuts down; the first comes up meanwhile. The next
        // connection goes to the second first, the one that worked.
        shutDown(conn);
        assertEquals(1, l.lost().get(10, TimeUnit.SECONDS).code());
        l.close();
        // A connect to the first would succeed now (the kernel completes it
        // before any accept), so the second's accept shows it went there first.
        holder.close();
        listen("127.0.0.1", first);
        CompletableFuture<Lease> again = client.lockAsync("several", LEASE);
        acceptAndGrant(second);
        assertEquals(42, again.get(10, TimeUnit.SECONDS).token().toLong());
    }

    @Test
    void aNameWithSeveralAddressesTriesEach() throws Exception {
        // The name stands for 127.0.0.2 (nothing listens there on this port: refused) and 127.0.0.1.
        ServerSocket fake = listen("127.0.0.1", 0);
        MonolockClient client = closing(MonolockClient.builder("locks.test:" + fake.getLocalPort())
                .resolver(resolver(Map.of("locks.test", List.of("127.0.0.2", "127.0.0.1")))).build());
        CompletableFuture<Lease> f = client.lockAsync("by-name", LEASE);
        acceptAndGrant(fake);
        Lease l = f.get(10, TimeUnit.SECONDS);
        assertEquals(42, l.token().toLong());
        assertTrue(l.isValid());
    }

    @Test
    void everyAddressRefusingFailsTheAttemptAsUnavailable() throws Exception {
        MonolockClient client = closing(MonolockClient.builder(List.of("127.0.0.1:" + refusingPort(), "127.0.0.1:" + refusingPort()))
                .connectTimeout(Duration.ofSeconds(30)).build());
        ServerUnavailableException e = assertThrows(ServerUnavailableException.class, () -> client.lock("refused", LEASE));
        assertTrue(e.isRetriable(), "MonolockClient.run retries it with backoff");
        assertTrue(e.getMessage().contains("cannot connect to"), e.getMessage());
        assertFalse(e.code().isPresent(), "no ERROR frame ended it");
    }

    @Test
    void aClosedPortThenTheRealServer() throws Exception {
        RealServer server = closing(new RealServer());
        MonolockClient client = closing(MonolockClient.builder(List.of("127.0.0.1:" + refusingPort(), server.address)).build());
        try (Lease l = client.lock("several-real", Duration.ofSeconds(2))) {
            assertTrue(l.isValid());
            assertEquals(server.port(), ((InetSocketAddress) l.connection().channel.getRemoteAddress()).getPort());
        }
        try (Lease l = client.lock("several-real", Duration.ofSeconds(2))) {
            assertTrue(l.isValid(), "the second connection starts from the server's address");
        }
    }
}
