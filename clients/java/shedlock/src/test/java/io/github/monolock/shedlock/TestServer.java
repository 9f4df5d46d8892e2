package io.github.monolock.shedlock;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * bin/monolock (the system property monolock.bin or MONOLOCK_BIN, as make
 * java-test passes it) on ports of 127.0.0.1 picked by the kernel, and what
 * its admin API says about a lock.
 */
final class TestServer implements AutoCloseable {
    private static final Pattern LISTEN = Pattern.compile("\"listen\":\"([^\"]+)\"");
    private static final Pattern ADMIN = Pattern.compile("\"admin_listen\":\"([^\"]+)\"");
    private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

    private final Process process;
    final String address;
    private final String admin;

    /** The server's path, or null when neither the property nor the variable names an executable. */
    static String binary() {
        String p = System.getProperty("monolock.bin");
        if (p == null || p.isEmpty() || p.startsWith("${")) p = System.getenv("MONOLOCK_BIN");
        return p != null && !p.isEmpty() && Files.isExecutable(Path.of(p)) ? p : null;
    }

    TestServer(String binary) throws IOException {
        List<String> cmd = List.of(binary, "-listen", "127.0.0.1:0", "-admin-listen", "127.0.0.1:0", "-log-format", "json");
        process = new ProcessBuilder(cmd).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
        BufferedReader log = new BufferedReader(new InputStreamReader(process.getErrorStream(), StandardCharsets.UTF_8));
        String a = null;
        String m = null;
        // A server that neither starts nor exits is killed after 20 s, which ends the read below.
        CompletableFuture<Void> startedOrKilled = new CompletableFuture<>();
        startedOrKilled.completeOnTimeout(null, 20, TimeUnit.SECONDS).thenRun(process::destroyForcibly); // not after cancel
        for (String line; (line = log.readLine()) != null; ) {
            if (!line.contains("\"monolock started\"")) continue;
            Matcher l = LISTEN.matcher(line);
            Matcher d = ADMIN.matcher(line);
            if (l.find()) a = l.group(1);
            if (d.find()) m = d.group(1);
            break;
        }
        startedOrKilled.cancel(false);
        if (a == null || m == null) {
            process.destroyForcibly();
            throw new IOException("monolock did not log \"monolock started\" (it exited, or was killed after 20 s): " + cmd);
        }
        address = a;
        admin = m;
        Thread drain = new Thread(() -> {
            try {
                while (log.readLine() != null) {
                    // the pipe must not fill up
                }
            } catch (IOException gone) {
                // the server has exited
            }
        }, "monolock-log");
        drain.setDaemon(true);
        drain.start();
    }

    /** Whether the server has a holder for the lock, from GET /api/locks/{name} (404: idle). */
    boolean held(String name) {
        URI uri = URI.create("http://" + admin + "/api/locks/" + URLEncoder.encode(name, StandardCharsets.UTF_8).replace("+", "%20"));
        try {
            HttpResponse<String> r = HTTP.send(HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(5)).build(),
                    HttpResponse.BodyHandlers.ofString());
            if (r.statusCode() == 404) return false;
            if (r.statusCode() != 200) throw new AssertionError("GET " + uri + ": " + r.statusCode() + " " + r.body());
            return r.body().contains("\"holder\":{");
        } catch (IOException e) {
            throw new AssertionError("GET " + uri + " failed", e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError("interrupted during GET " + uri, e);
        }
    }

    /**
     * Waits until the server has no holder for the lock: a released
     * connection's close reaches the server after close() returned, so the
     * release is an event to await (at most 10 s), not an instant.
     */
    boolean awaitFree(String name) {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (held(name)) {
            if (System.nanoTime() > end) return false;
            try {
                Thread.sleep(2);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return false;
            }
        }
        return true;
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
}
