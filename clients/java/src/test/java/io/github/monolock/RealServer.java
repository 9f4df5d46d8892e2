package io.github.monolock;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The real server (bin/monolock, given by the system property monolock.bin
 * or the environment variable MONOLOCK_BIN, as make java-test does) on free
 * ports of 127.0.0.1, with its admin API.
 */
final class RealServer implements AutoCloseable {
    private static final Pattern LISTEN = Pattern.compile("\"listen\":\"([^\"]+)\"");
    private static final Pattern ADMIN = Pattern.compile("\"admin_listen\":\"([^\"]+)\"");
    private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

    final Process process;
    final String address;
    final String admin;

    static String binary() {
        String p = System.getProperty("monolock.bin");
        if (p == null || p.isEmpty() || p.startsWith("${")) p = System.getenv("MONOLOCK_BIN");
        assumeTrue(p != null && !p.isEmpty() && Files.isExecutable(Path.of(p)),
                "needs the monolock server: make build, then pass -Dmonolock.bin=bin/monolock or MONOLOCK_BIN (make java-test does)");
        return p;
    }

    RealServer(String... args) throws IOException {
        this(binary(), List.of(args));
    }

    /** The server built at binary, outside JUnit (the benchmark). */
    static RealServer of(String binary) throws IOException {
        return new RealServer(binary, List.of());
    }

    private RealServer(String binary, List<String> args) throws IOException {
        List<String> cmd = new ArrayList<>(List.of(binary, "-listen", "127.0.0.1:0", "-admin-listen", "127.0.0.1:0", "-log-format", "json"));
        cmd.addAll(args);
        process = new ProcessBuilder(cmd).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
        BufferedReader err = new BufferedReader(new InputStreamReader(process.getErrorStream(), StandardCharsets.UTF_8));
        String line;
        String a = null;
        String m = null;
        while ((line = err.readLine()) != null) {
            if (!line.contains("\"monolock started\"")) continue;
            Matcher l = LISTEN.matcher(line);
            Matcher d = ADMIN.matcher(line);
            if (l.find()) a = l.group(1);
            if (d.find()) m = d.group(1);
            break;
        }
        if (a == null) {
            process.destroyForcibly();
            throw new IOException("monolock exited before it started: " + cmd);
        }
        address = a;
        admin = m;
        Thread drain = new Thread(() -> {
            try {
                while (err.readLine() != null) {
                    // keep the pipe from filling
                }
            } catch (IOException ignored) {
                // the server is gone
            }
        }, "monolock-stderr");
        drain.setDaemon(true);
        drain.start();
    }

    MonolockClient client() {
        return MonolockClient.builder(address).build();
    }

    /** How many sessions wait for the lock, from the admin API. */
    int waiters(String name) throws IOException, InterruptedException {
        HttpResponse<String> r = HTTP.send(HttpRequest.newBuilder(URI.create("http://" + admin + "/api/locks/"
                + URLEncoder.encode(name, StandardCharsets.UTF_8))).build(), HttpResponse.BodyHandlers.ofString());
        if (r.statusCode() == 404) return 0;
        String body = r.body();
        int at = body.indexOf("\"waiters\":[");
        if (at < 0) return 0;
        String list = body.substring(at + 11, body.indexOf(']', at));
        return list.isBlank() ? 0 : list.split("\\},\\{", -1).length;
    }

    /** Waits until n sessions are queued for the lock: an event, polled through the admin API. */
    void awaitWaiters(String name, int n) throws IOException, InterruptedException {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (waiters(name) != n) {
            if (System.nanoTime() > end) throw new AssertionError("never saw " + n + " waiters for " + name + "; last " + waiters(name));
            Thread.sleep(10);
        }
    }

    /** The server's port. */
    int port() {
        return Integer.parseInt(address.substring(address.lastIndexOf(':') + 1));
    }

    /** The local port of a lease's connection. */
    static int localPort(Lease l) throws IOException {
        return ((java.net.InetSocketAddress) l.connection().channel.getLocalAddress()).getPort();
    }

    /**
     * Whether /proc/net/tcp or tcp6 has a TIME_WAIT entry (state 06) from the
     * local port localPort to the remote port remotePort: whoever sent the
     * first FIN of a connection keeps one.
     */
    static boolean timeWait(int localPort, int remotePort) throws IOException {
        for (String file : new String[] {"/proc/net/tcp", "/proc/net/tcp6"}) {
            Path p = Path.of(file);
            if (!Files.exists(p)) continue;
            List<String> lines = Files.readAllLines(p);
            for (String line : lines.subList(1, lines.size())) {
                String[] f = line.trim().split("\\s+");
                int local = Integer.parseInt(f[1].substring(f[1].lastIndexOf(':') + 1), 16);
                int remote = Integer.parseInt(f[2].substring(f[2].lastIndexOf(':') + 1), 16);
                if (local == localPort && remote == remotePort && f[3].equals("06")) return true;
            }
        }
        return false;
    }

    void forceRelease(String name) throws IOException, InterruptedException {
        HttpResponse<String> r = HTTP.send(HttpRequest.newBuilder(URI.create("http://" + admin + "/api/locks/" + name + "/release"))
                .POST(HttpRequest.BodyPublishers.noBody()).build(), HttpResponse.BodyHandlers.ofString());
        if (r.statusCode() / 100 != 2) throw new IOException("force release: " + r.statusCode() + " " + r.body());
    }

    @Override
    public void close() {
        process.destroyForcibly();
        try {
            process.waitFor(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    static <T> T await(CompletableFuture<T> f) throws Exception {
        return f.get(20, TimeUnit.SECONDS);
    }
}
