package io.github.monolock.conformance;

import io.github.monolock.Lease;
import io.github.monolock.LockBusyException;
import io.github.monolock.LockLostException;
import io.github.monolock.MonolockClient;
import io.github.monolock.MonolockException;
import io.github.monolock.MonolockServerException;
import io.github.monolock.ServerUnavailableException;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.spec.PKCS8EncodedKeySpec;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.KeyManager;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

/**
 * The conformance kit's driver for the Java client (docs/conformance.md in
 * the monolock repository): reads the request line on stdin, calls the
 * client's public API and prints what it reported, one JSON object a line.
 * Built with the tests; not part of the jar.
 */
public final class ConformanceDriver {
    private static final String LOST = "\u0000lost";
    private static final String EOF = "\u0000eof";
    private static final PrintStream OUT = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, StandardCharsets.UTF_8);

    private final LinkedBlockingQueue<String> cmds = new LinkedBlockingQueue<>();
    private final long workStopMs;

    private ConformanceDriver(long workStopMs) {
        this.workStopMs = workStopMs;
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String first = in.readLine();
        if (first == null) return;
        Map<String, Object> req = Json.parse(first);
        Object stop = req.get("work_stop_ms");
        ConformanceDriver d = new ConformanceDriver(stop == null ? 0 : ((Number) stop).longValue());
        Thread reader = new Thread(() -> d.readCommands(in), "commands");
        reader.setDaemon(true);
        reader.start();
        // "addresses", when present, gives the client every address ("address" is the first, for older drivers).
        Object addresses = req.get("addresses");
        MonolockClient.Builder builder = addresses instanceof List
                ? MonolockClient.builder(strings((List<?>) addresses))
                : MonolockClient.builder((String) req.get("address"));
        Object tls = req.get("tls");
        if (tls instanceof Map) builder.sslContext(sslContext(castMap(tls)));
        try (MonolockClient client = builder.build()) {
            String mode = (String) req.get("mode");
            if ("acquire".equals(mode)) d.acquire(client, req);
            else if ("run".equals(mode)) d.run(client, req);
            else {
                System.err.println("conformance driver: unknown mode " + mode);
                System.exit(2);
            }
        }
    }

    private static List<String> strings(List<?> l) {
        List<String> out = new ArrayList<>();
        for (Object o : l) out.add((String) o);
        return out;
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> castMap(Object o) {
        return (Map<String, Object>) o;
    }

    /**
     * The request's TLS files as a user would load them: the CA as the trust
     * store and, for mutual TLS, the client certificate with its PKCS #8 key
     * as the key store. The client verifies the server by the host dialled
     * (an IP address here), so server_name is not needed.
     */
    private static SSLContext sslContext(Map<String, Object> tls) throws Exception {
        CertificateFactory x509 = CertificateFactory.getInstance("X.509");
        KeyStore trust = KeyStore.getInstance("PKCS12");
        trust.load(null, null);
        int n = 0;
        for (Certificate ca : certificates(x509, (String) tls.get("ca_file"))) trust.setCertificateEntry("ca" + n++, ca);
        TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        tmf.init(trust);
        KeyManager[] keyManagers = null;
        Object certFile = tls.get("cert_file");
        if (certFile instanceof String) {
            char[] password = new char[0];
            KeyStore keys = KeyStore.getInstance("PKCS12");
            keys.load(null, null);
            Certificate[] chain = certificates(x509, (String) certFile).toArray(new Certificate[0]);
            keys.setKeyEntry("client", privateKey((String) tls.get("key_file"), chain[0].getPublicKey().getAlgorithm()), password, chain);
            KeyManagerFactory kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
            kmf.init(keys, password);
            keyManagers = kmf.getKeyManagers();
        }
        SSLContext ctx = SSLContext.getInstance("TLS");
        ctx.init(keyManagers, tmf.getTrustManagers(), null);
        return ctx;
    }

    private static Collection<? extends Certificate> certificates(CertificateFactory x509, String path) throws Exception {
        try (InputStream in = Files.newInputStream(Path.of(path))) {
            return x509.generateCertificates(in);
        }
    }

    private static PrivateKey privateKey(String path, String algorithm) throws Exception {
        String pem = Files.readString(Path.of(path), StandardCharsets.US_ASCII);
        String base64 = pem.replaceAll("-----(BEGIN|END) PRIVATE KEY-----", "").replaceAll("\\s", "");
        return KeyFactory.getInstance(algorithm).generatePrivate(new PKCS8EncodedKeySpec(Base64.getDecoder().decode(base64)));
    }

    private void readCommands(BufferedReader in) {
        try {
            String line;
            while ((line = in.readLine()) != null) {
                try {
                    Object cmd = Json.parse(line).get("cmd");
                    if (cmd instanceof String) cmds.add((String) cmd);
                } catch (IllegalArgumentException ignored) {
                    // not a command line
                }
            }
        } catch (IOException ignored) {
            // the end of input, as far as the driver is concerned
        }
        cmds.add(EOF);
    }

    private void acquire(MonolockClient client, Map<String, Object> req) throws InterruptedException {
        Lease lease;
        try {
            lease = attempt(client, req);
        } catch (Reported e) {
            drain(null);
            return;
        } catch (IllegalArgumentException | MonolockException e) {
            report(e);
            drain(null);
            return;
        }
        if (lease == null) {
            emit("busy");
            drain(null);
            return;
        }
        emit("acquired", "token", lease.token().toString());
        boolean asked = hold(lease);
        lease.close();
        if (asked) emit("released");
        drain(lease);
    }

    private void run(MonolockClient client, Map<String, Object> req) throws InterruptedException {
        boolean[] called = {false};
        boolean[] released = {false};
        try {
            client.run(name(req), lease(req), l -> {
                called[0] = true;
                emit("acquired", "token", l.token().toString());
                released[0] = hold(l);
            });
        } catch (LockLostException e) {
            // reported by hold
        } catch (IllegalArgumentException | MonolockException e) {
            if (!called[0]) report(e);
        }
        Thread.interrupted(); // an interrupt of the loss the work did not take
        if (released[0]) emit("released");
        drain(null);
    }

    private static Lease attempt(MonolockClient client, Map<String, Object> req) throws InterruptedException {
        long waitMs = ((Number) req.get("wait_ms")).longValue();
        if (waitMs < 0) {
            // lockAsync reports a failure on the I/O thread: printed there, at once.
            CompletableFuture<Lease> f = client.lockAsync(name(req), lease(req));
            f.whenComplete((l, e) -> {
                if (e instanceof RuntimeException) report((RuntimeException) e);
            });
            try {
                return f.get();
            } catch (ExecutionException e) {
                throw new Reported(e.getCause());
            }
        }
        Optional<Lease> l = waitMs == 0 ? client.tryLock(name(req), lease(req))
                : client.tryLock(name(req), lease(req), Duration.ofMillis(waitMs));
        return l.orElse(null);
    }

    /**
     * The work: runs until the kit asks for the release (true) or the lock is
     * lost; then takes work_stop_ms to stop (false). In run mode the loss also
     * interrupts this thread: the interrupt is taken as the loss.
     */
    private boolean hold(Lease lease) {
        // Printed where the API reports it, on the client's I/O thread, before
        // the loss interrupts run's work. mono_ns is when the client decided
        // the loss (System.nanoTime is CLOCK_MONOTONIC): the kit times the
        // event by it, not by when a starved JVM got round to printing.
        lease.lost().thenAccept(e -> {
            if (e.code() >= 0) emit("lost", "reason", e.getMessage(), "code", e.code(), "mono_ns", e.decidedAtNanos());
            else emit("lost", "reason", e.getMessage(), "mono_ns", e.decidedAtNanos());
            cmds.add(LOST);
        });
        while (true) {
            String cmd;
            try {
                cmd = cmds.take();
            } catch (InterruptedException e) {
                if (lease.lost().isDone()) break;
                continue;
            }
            if (cmd.equals("release") || cmd.equals(EOF)) return cmd.equals("release");
            if (cmd.equals(LOST)) break;
        }
        if (workStopMs < 0) {
            String cmd = LOST;
            while (cmd.equals(LOST)) cmd = takeUninterruptibly();
            emit("work-stopped");
            return cmd.equals("release");
        }
        sleepUninterruptibly(workStopMs);
        emit("work-stopped");
        return false;
    }

    private void drain(Lease lease) {
        while (true) {
            String cmd = takeUninterruptibly();
            if (cmd.equals(EOF)) return;
            if (cmd.equals("release")) {
                if (lease != null) lease.close();
                emit("released");
            }
        }
    }

    private String takeUninterruptibly() {
        while (true) {
            try {
                return cmds.take();
            } catch (InterruptedException e) {
                // a loss's interrupt: the work goes on until it stops by itself
            }
        }
    }

    private static void sleepUninterruptibly(long ms) {
        long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(ms);
        for (long left; (left = end - System.nanoTime()) > 0; ) {
            try {
                TimeUnit.NANOSECONDS.sleep(left);
            } catch (InterruptedException e) {
                // the work takes work_stop_ms to stop whatever interrupts it
            }
        }
    }

    /** A failure of lockAsync, printed already by its callback. */
    private static final class Reported extends RuntimeException {
        private static final long serialVersionUID = 1L;

        Reported(Throwable cause) {
            super(cause);
        }
    }

    /** An attempt that failed before the grant. */
    private static void report(RuntimeException e) {
        if (e instanceof IllegalArgumentException) {
            emit("invalid-input", "reason", e.getMessage());
        } else if (e instanceof MonolockServerException) {
            MonolockServerException s = (MonolockServerException) e;
            emit("error", "code", s.code(), "retriable", false, "reason", s.reason());
        } else if (e instanceof ServerUnavailableException && ((ServerUnavailableException) e).code().isPresent()) {
            ServerUnavailableException s = (ServerUnavailableException) e;
            emit("error", "code", s.code().getAsInt(), "retriable", s.isRetriable(), "reason", s.reason());
        } else if (e instanceof LockBusyException) {
            emit("busy");
        } else {
            emit("unavailable", "reason", String.valueOf(e.getMessage()));
        }
    }

    /**
     * The name as the request gives it. A Java string cannot hold invalid
     * UTF-8: each byte of an invalid name becomes a lone low surrogate (as
     * Python's surrogateescape does), which the client must refuse.
     */
    private static String name(Map<String, Object> req) {
        Object n = req.get("name");
        if (n instanceof String) return (String) n;
        String hex = (String) req.get("name_hex");
        StringBuilder b = new StringBuilder();
        for (int i = 0; i + 1 < hex.length(); i += 2) {
            int v = Integer.parseInt(hex.substring(i, i + 2), 16);
            b.append(v < 0x80 ? (char) v : (char) (0xdc00 + v));
        }
        return b.toString();
    }

    private static Duration lease(Map<String, Object> req) {
        return Duration.ofNanos(((Number) req.get("lease_us")).longValue() * 1000);
    }

    private static synchronized void emit(String event, Object... fields) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("event", event);
        for (int i = 0; i < fields.length; i += 2) m.put((String) fields[i], fields[i + 1]);
        OUT.println(Json.write(m));
        OUT.flush();
    }
}
