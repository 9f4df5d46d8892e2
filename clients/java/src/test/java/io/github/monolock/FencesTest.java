package io.github.monolock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.github.monolock.Fences.Dialect;
import java.net.URI;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Fences.admit against a real PostgreSQL and a real MariaDB, found through
 * MONOLOCK_TEST_POSTGRES and MONOLOCK_TEST_MYSQL (make java-test runs the
 * tests under internal/testsupport/testdb/withdb, which starts both).
 */
@org.junit.jupiter.api.Timeout(120)
class FencesTest {
    private static final FencingToken BELOW_2_63 = FencingToken.ofBits(Long.MAX_VALUE);
    private static final FencingToken AT_2_63 = FencingToken.ofBits(Long.MIN_VALUE);
    private static final FencingToken MAX = FencingToken.ofBits(-1L);

    /** A JDBC connection to the test database of the dialect, the fence table created; skips without one. */
    static Connection connect(Dialect d) throws SQLException {
        String env = d == Dialect.POSTGRESQL ? "MONOLOCK_TEST_POSTGRES" : "MONOLOCK_TEST_MYSQL";
        String url = System.getenv(env);
        assumeTrue(url != null && !url.isEmpty(), env + " is not set: run under go run ./internal/testsupport/testdb/withdb (make java-test does when the servers of make fence-deps are installed)");
        URI u = URI.create(url);
        String user = u.getUserInfo();
        String jdbc = d == Dialect.POSTGRESQL
                ? "jdbc:postgresql://" + u.getHost() + ":" + u.getPort() + u.getPath() + "?sslmode=disable&user=" + user
                : "jdbc:mariadb://" + u.getHost() + ":" + u.getPort() + u.getPath() + "?user=" + user;
        Connection c = DriverManager.getConnection(jdbc);
        try (Statement s = c.createStatement()) {
            s.execute(Fences.schema(d));
        }
        c.setAutoCommit(false);
        return c;
    }

    static FencingToken stored(Connection c, String resource) throws SQLException {
        try (Statement s = c.createStatement();
                ResultSet rs = s.executeQuery("SELECT CAST(token AS CHAR(20)) FROM monolock_fence WHERE resource = '" + resource + "'")) {
            FencingToken t = rs.next() ? FencingToken.parse(rs.getString(1).trim()) : null;
            if (!c.getAutoCommit()) c.commit();
            return t;
        }
    }

    static void clear(Connection c, String resource) throws SQLException {
        try (Statement s = c.createStatement()) {
            s.executeUpdate("DELETE FROM monolock_fence WHERE resource = '" + resource + "'");
        }
        c.commit();
    }

    @ParameterizedTest
    @EnumSource(Dialect.class)
    void tokensOrderAsUnsignedAcross2To63(Dialect d) throws Exception {
        try (Connection c = connect(d)) {
            String r = "java-order-" + d.id();
            clear(c, r);
            for (FencingToken t : new FencingToken[] {BELOW_2_63, AT_2_63, MAX}) {
                Fences.admit(c, r, t);
                c.commit();
            }
            assertEquals(MAX, stored(c, r));
            StaleTokenException e = assertThrows(StaleTokenException.class, () -> Fences.admit(c, r, AT_2_63));
            assertEquals(AT_2_63, e.token());
            assertEquals(r, e.resource());
            assertEquals(MAX, stored(c, r));
        }
    }

    @ParameterizedTest
    @EnumSource(Dialect.class)
    void theSameTokenIsAdmittedAgainAndZeroNever(Dialect d) throws Exception {
        try (Connection c = connect(d)) {
            String r = "java-again-" + d.id();
            clear(c, r);
            FencingToken t = FencingToken.ofBits(0x1234_5678_0000_0001L);
            Fences.admit(c, r, t);
            c.commit();
            Fences.admit(c, Dialect.valueOf(d.name()), r, t); // the same holder writes again
            c.commit();
            assertThrows(StaleTokenException.class, () -> Fences.admit(c, r, FencingToken.ofBits(0)));
            assertEquals(t, stored(c, r));
        }
    }

    @ParameterizedTest
    @EnumSource(Dialect.class)
    void aStaleAdmitRollsTheTransactionBack(Dialect d) throws Exception {
        try (Connection c = connect(d)) {
            String r = "java-rollback-" + d.id();
            clear(c, r);
            Fences.admit(c, r, AT_2_63);
            c.commit();
            try (Statement s = c.createStatement()) {
                s.executeUpdate("DELETE FROM monolock_fence WHERE resource = 'java-witness-" + d.id() + "'");
                s.executeUpdate("INSERT INTO monolock_fence (resource, token) VALUES ('java-witness-" + d.id() + "', 5)");
            }
            assertThrows(StaleTokenException.class, () -> Fences.admit(c, r, BELOW_2_63));
            assertEquals(null, stored(c, "java-witness-" + d.id()), "the write before the stale admit did not land");
        }
    }

    @ParameterizedTest
    @EnumSource(Dialect.class)
    void aRolledBackAdmitLeavesTheFenceAsItWas(Dialect d) throws Exception {
        try (Connection c = connect(d)) {
            String r = "java-undo-" + d.id();
            clear(c, r);
            Fences.admit(c, r, BELOW_2_63);
            c.commit();
            Fences.admit(c, r, MAX);
            c.rollback();
            assertEquals(BELOW_2_63, stored(c, r));
            Fences.admit(c, r, AT_2_63); // MAX was never admitted
            c.commit();
        }
    }

    @ParameterizedTest
    @EnumSource(Dialect.class)
    void aMissingTableSaysWhatToRun(Dialect d) throws Exception {
        try (Connection c = connect(d)) {
            try (Statement s = c.createStatement()) {
                if (d == Dialect.POSTGRESQL) {
                    s.execute("CREATE SCHEMA IF NOT EXISTS java_no_fence");
                    c.commit();
                    s.execute("SET search_path TO java_no_fence");
                } else {
                    s.execute("CREATE DATABASE IF NOT EXISTS java_no_fence");
                    c.setCatalog("java_no_fence");
                }
            }
            SQLException e = assertThrows(SQLException.class, () -> Fences.admit(c, "x", MAX));
            assertFalse(e instanceof StaleTokenException);
            assertTrue(e.getMessage().contains("Fences.schema(Dialect." + d + ")"), e.getMessage());
        }
    }

    @ParameterizedTest
    @EnumSource(Dialect.class)
    void autoCommitIsRefused(Dialect d) throws Exception {
        try (Connection c = connect(d)) {
            c.setAutoCommit(true);
            assertThrows(IllegalArgumentException.class, () -> Fences.admit(c, "x", MAX));
        }
    }

    /**
     * Two holders race on one resource at READ COMMITTED and REPEATABLE READ
     * (the defaults of PostgreSQL and of MySQL): the first admits and holds
     * the row, the second's admit is seen waiting for the row lock, the first
     * commits. The lower token never commits after the higher one; on
     * PostgreSQL at REPEATABLE READ the second fails with a serialization
     * failure instead (docs/fencing.md, Isolation levels).
     */
    @ParameterizedTest
    @EnumSource(Dialect.class)
    void racingHoldersAreOrderedByTheRowLock(Dialect d) throws Exception {
        int[] levels = {Connection.TRANSACTION_READ_COMMITTED, Connection.TRANSACTION_REPEATABLE_READ};
        for (int level : levels) {
            for (boolean newerFirst : new boolean[] {false, true}) {
                String r = "java-race-" + d.id() + "-" + level + "-" + newerFirst;
                try (Connection a = connect(d); Connection b = connect(d); Connection watch = connect(d)) {
                    watch.setAutoCommit(true); // each look at the server's views a statement of its own
                    a.setTransactionIsolation(level);
                    b.setTransactionIsolation(level);
                    clear(a, r);
                    Fences.admit(a, r, FencingToken.ofBits(1));
                    a.commit();
                    FencingToken first = newerFirst ? MAX : AT_2_63;
                    FencingToken second = newerFirst ? AT_2_63 : MAX;
                    Fences.admit(a, r, first); // holds the row
                    CompletableFuture<Void> other = CompletableFuture.runAsync(() -> {
                        try {
                            Fences.admit(b, r, second);
                            b.commit();
                        } catch (SQLException e) {
                            throw new java.util.concurrent.CompletionException(e);
                        }
                    });
                    awaitLockWait(d, watch, other, r);
                    assertFalse(other.isDone(), "the second admit waits for the first transaction");
                    a.commit();
                    boolean serializationFailure = d == Dialect.POSTGRESQL && level == Connection.TRANSACTION_REPEATABLE_READ;
                    if (newerFirst || serializationFailure) {
                        Throwable e = assertThrows(java.util.concurrent.ExecutionException.class, () -> other.get(30, TimeUnit.SECONDS)).getCause();
                        if (serializationFailure) {
                            // PostgreSQL refuses to update a row changed after the snapshot: a failed transaction, never a stale write.
                            assertEquals("40001", ((SQLException) e).getSQLState(), String.valueOf(e));
                        } else {
                            assertTrue(e instanceof StaleTokenException, String.valueOf(e));
                        }
                    } else {
                        other.get(30, TimeUnit.SECONDS);
                    }
                    assertEquals(serializationFailure && !newerFirst ? AT_2_63 : MAX, stored(watch, r), "the lower token never commits after the higher");
                }
            }
        }
    }

    /** Waits until a session waits for a row lock: seen in the database's own views. */
    private static void awaitLockWait(Dialect d, Connection watch, CompletableFuture<Void> other, String what) throws Exception {
        // PostgreSQL reports the lock wait itself. MariaDB's INNODB_TRX did not
        // show this wait reliably to a JDBC session (its rows are a cache), so
        // there the sign is the second admit running at the server while the
        // first transaction holds the row: it cannot finish before that commits.
        String q = d == Dialect.POSTGRESQL
                ? "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                : "SELECT count(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'INSERT INTO monolock_fence%'";
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (true) {
            try (Statement s = watch.createStatement(); ResultSet rs = s.executeQuery(q)) {
                rs.next();
                if (rs.getInt(1) > 0) return;
            }
            if (other.isDone() || System.nanoTime() > end) {
                StringBuilder ps = new StringBuilder();
                try (Statement s = watch.createStatement(); ResultSet rs = s.executeQuery(d == Dialect.POSTGRESQL
                        ? "SELECT state || ' ' || coalesce(wait_event_type, '') || ' ' || left(query, 60) FROM pg_stat_activity"
                        : "SELECT CONCAT(COALESCE(STATE, ''), ' | ', LEFT(COALESCE(INFO, ''), 60)) FROM information_schema.PROCESSLIST")) {
                    while (rs.next()) ps.append("\n  ").append(rs.getString(1));
                }
                throw new AssertionError(what + ": the second admit never waited for the row lock (done: " + other.isDone() + ")" + ps);
            }
            Thread.sleep(5);
        }
    }
}
