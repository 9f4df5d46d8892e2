package io.github.monolock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.File;
import java.lang.ref.ReferenceQueue;
import java.lang.ref.WeakReference;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.cert.CertificateFactory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.stream.Stream;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLSession;
import javax.net.ssl.TrustManagerFactory;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Mutual TLS against the real server, through SSLEngine, with session resumption (needs openssl for a throwaway CA). */
@org.junit.jupiter.api.Timeout(60) // a hang is a failure, not a stuck build
class TlsTest {
    private static final Duration LEASE = Duration.ofSeconds(2);
    private static Path dir;

    @BeforeAll
    static void pki() throws Exception {
        RealServer.binary();
        assumeTrue(onPath("openssl"), "needs openssl for a throwaway CA: apt-get install -y openssl");
        dir = Files.createTempDirectory("monolock-java-tls-");
        String[] ec = {"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"};
        openssl(concat(new String[] {"req", "-x509", "-new"}, ec, new String[] {"-keyout", "ca-key.pem", "-out", "ca.pem", "-days", "1",
                "-subj", "/CN=test CA", "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign"}));
        for (String[] n : new String[][] {{"server", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"},
                {"client", "subjectAltName=URI:spiffe://test/worker\nextendedKeyUsage=clientAuth\n"},
                {"stranger", "subjectAltName=URI:spiffe://test/stranger\nextendedKeyUsage=clientAuth\n"}}) {
            String name = n[0];
            openssl(concat(new String[] {"req", "-new"}, ec, new String[] {"-keyout", name + "-key.pem", "-out", name + ".csr", "-subj", "/CN=" + name}));
            Files.writeString(dir.resolve(name + ".ext"), n[1]);
            String ca = name.equals("stranger") ? "stranger-ca" : "ca";
            if (name.equals("stranger")) {
                openssl(concat(new String[] {"req", "-x509", "-new"}, ec, new String[] {"-keyout", "stranger-ca-key.pem", "-out", "stranger-ca.pem",
                        "-days", "1", "-subj", "/CN=other CA", "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign"}));
            }
            openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey", ca + "-key.pem", "-CAcreateserial",
                    "-days", "1", "-extfile", name + ".ext", "-out", name + ".pem");
            openssl("pkcs12", "-export", "-in", name + ".pem", "-inkey", name + "-key.pem", "-out", name + ".p12", "-passout", "pass:test");
        }
    }

    @AfterAll
    static void clean() throws IOException {
        if (dir == null) return;
        try (Stream<Path> s = Files.walk(dir)) {
            s.sorted(Comparator.reverseOrder()).map(Path::toFile).forEach(File::delete);
        }
    }

    private RealServer server() throws IOException {
        return new RealServer("-tls-cert", dir.resolve("server.pem").toString(), "-tls-key", dir.resolve("server-key.pem").toString(),
                "-tls-client-ca", dir.resolve("ca.pem").toString());
    }

    @Test
    void mutualTlsHoldsAndResumesAcrossTheClientsConnections() throws Exception {
        try (RealServer server = server();
                MonolockClient client = MonolockClient.builder(server.address).sslContext(context("client")).build()) {
            Lease first = client.lock("tls", LEASE);
            assertFalse(first.isTlsResumed(), "the client's first connection makes a full handshake");
            CompletableFuture<Lease> waiting = client.lockAsync("tls", LEASE);
            server.awaitWaiters("tls", 1);
            Thread.sleep(2500); // longer than the lease: heartbeats over TLS keep it
            assertTrue(first.isValid());
            int port = RealServer.localPort(first);
            first.close();
            assertFalse(RealServer.timeWait(port, server.port()), "RELEASE inside TLS: the server closes first");
            FencingToken last = first.token();
            try (Lease l = RealServer.await(waiting)) {
                assertTrue(l.isTlsResumed(), "a later connection resumes the session of an earlier one");
                assertTrue(l.token().isAfter(last));
                last = l.token();
            }
            for (int i = 0; i < 3; i++) {
                try (Lease l = client.lock("tls", LEASE)) {
                    assertTrue(l.isTlsResumed(), "each connection leaves a ticket for the next");
                    assertTrue(l.token().isAfter(last));
                    last = l.token();
                }
            }
        }
    }

    @Test
    void resumedSessionsDoNotPileUp() throws Exception {
        int locks = 200;
        try (RealServer server = server();
                MonolockClient client = MonolockClient.builder(server.address).sslContext(context("client")).build()) {
            List<WeakReference<SSLSession>> sessions = new ArrayList<>();
            ReferenceQueue<SSLSession> gone = new ReferenceQueue<>();
            for (int i = 0; i < locks; i++) {
                try (Lease l = client.lock("tls-" + i, LEASE)) {
                    if (i > 0) assertTrue(l.isTlsResumed(), "lock " + i + " resumes");
                    sessions.add(new WeakReference<>(l.connection().tls.engine.getSession(), gone));
                }
            }
            // Every session but the newest (whose ticket the next connection
            // uses) must be collectable: wait for their references to clear.
            int cleared = 0;
            for (int tries = 0; cleared < locks - 2 && tries < 20; tries++) {
                System.gc();
                while (gone.remove(100) != null) cleared++;
            }
            long alive = sessions.stream().filter(r -> r.get() != null).count();
            assertTrue(alive <= 2, alive + " of " + locks + " TLS sessions still reachable after a GC: each resumed lock keeps one");
        }
    }

    @Test
    void aCertificateTheServerRejectsIsNotRetriable() throws Exception {
        try (RealServer server = server();
                MonolockClient client = MonolockClient.builder(server.address).sslContext(context("stranger")).build()) {
            try {
                client.lock("tls", LEASE).close();
                fail("a client certificate of another CA was accepted");
            } catch (ServerUnavailableException e) {
                assertFalse(e.isRetriable(), e.getMessage());
            }
        }
    }

    @Test
    void aServerTheClientDoesNotTrustIsRefused() throws Exception {
        SSLContext ctx = SSLContext.getInstance("TLS");
        ctx.init(null, null, null); // the JDK's CAs: not the test CA
        try (RealServer server = server(); MonolockClient client = MonolockClient.builder(server.address).sslContext(ctx).build()) {
            ServerUnavailableException e = org.junit.jupiter.api.Assertions.assertThrows(ServerUnavailableException.class, () -> client.lock("tls", LEASE));
            assertFalse(e.isRetriable());
            assertEquals(0, server.waiters("tls"));
        }
    }

    private static SSLContext context(String who) throws Exception {
        KeyStore keys = KeyStore.getInstance("PKCS12");
        try (InputStream in = Files.newInputStream(dir.resolve(who + ".p12"))) {
            keys.load(in, "test".toCharArray());
        }
        KeyManagerFactory kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        kmf.init(keys, "test".toCharArray());
        KeyStore trust = KeyStore.getInstance(KeyStore.getDefaultType());
        trust.load(null, null);
        try (InputStream in = Files.newInputStream(dir.resolve("ca.pem"))) {
            trust.setCertificateEntry("ca", CertificateFactory.getInstance("X.509").generateCertificate(in));
        }
        TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        tmf.init(trust);
        SSLContext ctx = SSLContext.getInstance("TLS");
        ctx.init(kmf.getKeyManagers(), tmf.getTrustManagers(), null);
        return ctx;
    }

    private static void openssl(String... args) throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>(List.of("openssl"));
        cmd.addAll(List.of(args));
        Process p = new ProcessBuilder(cmd).directory(dir.toFile()).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes());
        if (p.waitFor() != 0) throw new IOException("openssl " + String.join(" ", args) + ": " + out);
    }

    private static boolean onPath(String tool) {
        for (String d : System.getenv().getOrDefault("PATH", "").split(File.pathSeparator)) {
            if (Files.isExecutable(Path.of(d, tool))) return true;
        }
        return false;
    }

    private static String[] concat(String[]... parts) {
        return Stream.of(parts).flatMap(Stream::of).toArray(String[]::new);
    }
}
