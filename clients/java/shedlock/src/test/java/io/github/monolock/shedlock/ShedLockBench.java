package io.github.monolock.shedlock;

import io.github.monolock.MonolockClient;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.LockProvider;
import net.javacrumbs.shedlock.core.SimpleLock;
import net.javacrumbs.shedlock.provider.jdbctemplate.JdbcTemplateLockProvider;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.SingleConnectionDataSource;

/**
 * make shedlock-bench: lock+unlock cycles through MonolockLockProvider (the
 * real server) and ShedLock's JDBC provider (PostgreSQL from
 * MONOLOCK_TEST_POSTGRES, as bin/withdb sets it), one after the other in the
 * same run; then how long a dead node's lock stays taken with each.
 */
public final class ShedLockBench {
    private static final Duration AT_MOST = Duration.ofSeconds(10);
    private static final Duration LEASE = Duration.ofSeconds(2);

    private ShedLockBench() {
    }

    public static void main(String[] args) throws Exception {
        String server = null;
        int cycles = 2000;
        for (int i = 0; i + 1 < args.length; i += 2) {
            if (args[i].equals("-server")) server = args[i + 1];
            else if (args[i].equals("-cycles")) cycles = Integer.parseInt(args[i + 1]);
            else throw new IllegalArgumentException("unknown flag " + args[i] + "; the flags are -server PATH and -cycles N");
        }
        if (server == null) throw new IllegalArgumentException("give -server bin/monolock");
        String pg = System.getenv("MONOLOCK_TEST_POSTGRES");
        if (pg == null || pg.isEmpty()) throw new IllegalStateException("MONOLOCK_TEST_POSTGRES is not set: run under bin/withdb (make shedlock-bench does)");
        System.out.printf("ShedLock as pinned in pom.xml, %d lock+unlock cycles each, one thread, after %d warm-up cycles%n",
                cycles, cycles / 10);

        try (TestServer srv = new TestServer(server);
                MonolockClient client = MonolockClient.builder(srv.address).build();
                MonolockLockProvider monolock = new MonolockLockProvider(client, LEASE);
                SingleConnectionDataSource ds = postgres(pg)) {
            JdbcTemplateLockProvider jdbc = new JdbcTemplateLockProvider(JdbcTemplateLockProvider.Configuration.builder()
                    .withJdbcTemplate(new JdbcTemplate(ds)).usingDbTime().build());
            cycles("monolock (MonolockLockProvider)", monolock, cycles);
            cycles("PostgreSQL (JdbcTemplateLockProvider, usingDbTime)", jdbc, cycles);

            System.out.printf("a dead node's lock (lockAtMostFor %d s, lease %d s): free again after%n", AT_MOST.toSeconds(), LEASE.toSeconds());
            System.out.printf("  monolock:   %6.2f s (the node's JVM frozen with SIGSTOP while it held the lock: a dead host, its connection silent)%n",
                    deadNode(srv.address, monolock, "-STOP"));
            System.out.printf("  monolock:   %6.2f s (the node's JVM killed with SIGKILL: its kernel closes the connection)%n",
                    deadNode(srv.address, monolock, "-KILL"));
            jdbc.lock(config("dead-node", AT_MOST)).orElseThrow(); // never unlocked: a crash leaves the row as it is
            System.out.printf("  PostgreSQL: %6.2f s (the row left locked, as a crashed node leaves it)%n", freedAfter(jdbc, System.nanoTime()));
        }
    }

    private static SingleConnectionDataSource postgres(String url) throws Exception {
        URI u = URI.create(url);
        String user = u.getUserInfo() == null ? "postgres" : u.getUserInfo().split(":", 2)[0];
        SingleConnectionDataSource ds = new SingleConnectionDataSource(
                "jdbc:postgresql://" + u.getHost() + ":" + u.getPort() + u.getPath() + "?sslmode=disable", user, "", true);
        try (Connection c = ds.getConnection(); Statement s = c.createStatement()) {
            s.execute("CREATE TABLE IF NOT EXISTS shedlock(name VARCHAR(64) NOT NULL PRIMARY KEY, lock_until TIMESTAMP NOT NULL,"
                    + " locked_at TIMESTAMP NOT NULL, locked_by VARCHAR(255) NOT NULL)");
        }
        return ds;
    }

    private static LockConfiguration config(String name, Duration atMost) {
        return new LockConfiguration(Instant.now(), name, atMost, Duration.ZERO);
    }

    private static void cycles(String what, LockProvider provider, int n) {
        long[] took = new long[n];
        for (int i = 0; i < n / 10; i++) cycle(provider);
        long start = System.nanoTime();
        for (int i = 0; i < n; i++) {
            long t = System.nanoTime();
            cycle(provider);
            took[i] = System.nanoTime() - t;
        }
        double seconds = (System.nanoTime() - start) / 1e9;
        Arrays.sort(took);
        System.out.printf("  %-52s median %7.1f µs/cycle, p99 %7.1f µs, %8.0f cycles/s%n",
                what, took[n / 2] / 1e3, took[n * 99 / 100] / 1e3, n / seconds);
    }

    private static void cycle(LockProvider provider) {
        Optional<SimpleLock> lock = provider.lock(config("bench", AT_MOST));
        lock.orElseThrow(() -> new IllegalStateException("the bench lock was busy: nothing else should hold it")).unlock();
    }

    /** Starts a JVM that takes the lock through the provider, signals it once it holds it, and times the lock's return. */
    private static double deadNode(String address, LockProvider provider, String signal) throws Exception {
        Process node = new ProcessBuilder(List.of(Path.java(), "-cp", System.getProperty("java.class.path"),
                DeadNode.class.getName(), address, "dead-node", Long.toString(LEASE.toMillis())))
                .redirectError(ProcessBuilder.Redirect.INHERIT).start();
        try (BufferedReader out = new BufferedReader(new InputStreamReader(node.getInputStream(), StandardCharsets.UTF_8))) {
            String line = out.readLine();
            if (!"locked".equals(line)) throw new IllegalStateException("the dead node did not take the lock: " + line);
            Process kill = new ProcessBuilder("kill", signal, Long.toString(node.pid())).inheritIO().start();
            if (kill.waitFor() != 0) throw new IllegalStateException("kill " + signal + " " + node.pid() + " failed");
            return freedAfter(provider, System.nanoTime());
        } finally {
            node.destroyForcibly();
        }
    }

    /** Tries the lock every 10 ms (at most a minute) and returns the seconds since start when it was had. */
    private static double freedAfter(LockProvider provider, long start) throws InterruptedException {
        while (System.nanoTime() - start < TimeUnit.MINUTES.toNanos(1)) {
            Optional<SimpleLock> lock = provider.lock(config("dead-node", AT_MOST));
            if (lock.isPresent()) {
                double s = (System.nanoTime() - start) / 1e9;
                lock.get().unlock();
                return s;
            }
            Thread.sleep(10);
        }
        throw new IllegalStateException("the dead node's lock was still taken after a minute");
    }

    /** The java executable of this JVM. */
    private static final class Path {
        static String java() {
            return java.nio.file.Path.of(System.getProperty("java.home"), "bin", "java").toString();
        }
    }

    /** The node that dies: takes the lock through the provider, says so, and waits to be killed. */
    public static final class DeadNode {
        private DeadNode() {
        }

        public static void main(String[] args) throws Exception {
            MonolockClient client = MonolockClient.builder(args[0]).build();
            MonolockLockProvider provider = new MonolockLockProvider(client, Duration.ofMillis(Long.parseLong(args[2])));
            provider.lock(config(args[1], AT_MOST)).orElseThrow(() -> new IllegalStateException("the lock was busy"));
            System.out.println("locked");
            System.out.flush();
            Thread.sleep(TimeUnit.MINUTES.toMillis(2));
        }
    }
}
