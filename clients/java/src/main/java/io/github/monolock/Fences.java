package io.github.monolock;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Locale;

/**
 * The fencing token checked where the work lands: a table of the largest
 * token admitted per resource, and the statement that admits a token inside
 * the caller's transaction (docs/fencing.md of monolock, the contract every
 * client implements). JDBC only: bring your driver (PostgreSQL, MySQL or
 * MariaDB).
 *
 * <pre>{@code
 * conn.setAutoCommit(false);
 * Fences.admit(conn, lease.name(), lease.token());   // StaleTokenException: rolled back, stop
 * try (PreparedStatement w = conn.prepareStatement("UPDATE reports SET body = ? WHERE id = ?")) { ... }
 * conn.commit();
 * }</pre>
 *
 * <p>The admit takes the resource's row lock until the transaction ends, so
 * a newer holder's admit waits for this transaction and compares against what
 * it committed: an older holder's write never commits after a newer holder's
 * admit. Tokens are compared as unsigned 64-bit numbers, in SQL
 * ({@code numeric(20,0)}, {@code BIGINT UNSIGNED}), sent as decimal text.
 */
public final class Fences {
    private Fences() {}

    /** The name of the fence table. */
    public static final String TABLE = "monolock_fence";

    /** The SQL dialects of the fence: its table and its admit statement differ. */
    public enum Dialect {
        /** PostgreSQL. */
        POSTGRESQL,
        /** MySQL and MariaDB. */
        MYSQL;

        /**
         * The dialect's name as every client spells it.
         *
         * @return {@code "postgresql"} or {@code "mysql"}
         */
        public String id() {
            return name().toLowerCase(Locale.ROOT);
        }
    }

    private static final String SCHEMA_POSTGRESQL = "CREATE TABLE IF NOT EXISTS monolock_fence (\n"
            + "    resource text PRIMARY KEY,\n"
            + "    token    numeric(20,0) NOT NULL CHECK (token BETWEEN 1 AND 18446744073709551615)\n"
            + ")";
    private static final String SCHEMA_MYSQL = "CREATE TABLE IF NOT EXISTS monolock_fence (\n"
            + "    resource VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,\n"
            + "    token    BIGINT UNSIGNED NOT NULL\n"
            + ") ENGINE=InnoDB";
    // docs/fencing.md's statements, with JDBC's ? for PostgreSQL's $1 and $2.
    private static final String ADMIT_POSTGRESQL = "INSERT INTO monolock_fence AS f (resource, token) VALUES (?, ?::numeric(20,0))\n"
            + "ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token WHERE f.token <= EXCLUDED.token\n"
            + "RETURNING 1";
    private static final String ADMIT_MYSQL = "INSERT INTO monolock_fence (resource, token) VALUES (?, IF(LAST_INSERT_ID(1), CAST(? AS UNSIGNED), 0))\n"
            + "ON DUPLICATE KEY UPDATE token = IF(LAST_INSERT_ID(token <= VALUES(token)), VALUES(token), token)";

    /**
     * The DDL of the fence table: one statement, safe to run again.
     *
     * @param d the dialect
     * @return the {@code CREATE TABLE IF NOT EXISTS} statement
     */
    public static String schema(Dialect d) {
        return d == Dialect.POSTGRESQL ? SCHEMA_POSTGRESQL : SCHEMA_MYSQL;
    }

    /**
     * The admit statement, with JDBC parameters: the resource, then the token
     * as decimal text.
     *
     * @param d the dialect
     * @return the statement
     */
    public static String admitStatement(Dialect d) {
        return d == Dialect.POSTGRESQL ? ADMIT_POSTGRESQL : ADMIT_MYSQL;
    }

    /**
     * {@link #admit(Connection, Dialect, String, FencingToken)} with the
     * dialect read from the connection's metadata (PostgreSQL, MySQL or MariaDB).
     *
     * @param conn a connection inside the transaction of the guarded write
     * @param resource the guarded resource, usually the lock's name
     * @param token the lease's token
     * @throws StaleTokenException when a larger token was admitted (rolled back)
     * @throws SQLException any other failure (rolled back), the missing table with what to run
     */
    public static void admit(Connection conn, String resource, FencingToken token) throws SQLException {
        admit(conn, dialectOf(conn), resource, token);
    }

    /**
     * Admits the token for the resource inside the caller's transaction, in
     * one statement and one round trip, before the guarded write: it records
     * the token when it is greater than or equal to the stored one (equal: the
     * same holder writes many times) and locks the resource's row until the
     * transaction ends. Whenever it does not admit, it rolls the transaction
     * back, so nothing the transaction did lands. Token 0 is never admitted.
     *
     * @param conn a connection with auto-commit off, inside the transaction of the guarded write
     * @param d the dialect
     * @param resource the guarded resource, usually the lock's name
     * @param token the lease's token
     * @throws StaleTokenException when a larger token was admitted (rolled back)
     * @throws SQLException any other failure (rolled back), the missing table with what to run
     * @throws IllegalArgumentException when the connection is in auto-commit mode
     */
    public static void admit(Connection conn, Dialect d, String resource, FencingToken token) throws SQLException {
        if (conn.getAutoCommit()) {
            throw new IllegalArgumentException("monolock fence: the connection is in auto-commit mode; call"
                    + " conn.setAutoCommit(false) and admit inside the transaction that does the guarded write");
        }
        boolean admitted;
        try {
            admitted = token.toLong() != 0 && run(conn, d, resource, token.toString());
        } catch (SQLException e) {
            rollback(conn, e);
            if (missingTable(e)) {
                throw new SQLException("monolock fence: the fence table " + TABLE + " does not exist: create it with"
                        + " Fences.schema(Dialect." + d + ") (" + e.getMessage() + ")", e.getSQLState(), e.getErrorCode(), e);
            }
            throw e;
        }
        if (!admitted) {
            StaleTokenException stale = new StaleTokenException(resource, token);
            rollback(conn, stale);
            throw stale;
        }
    }

    private static boolean run(Connection conn, Dialect d, String resource, String token) throws SQLException {
        if (d == Dialect.POSTGRESQL) {
            try (PreparedStatement ps = conn.prepareStatement(ADMIT_POSTGRESQL)) {
                ps.setString(1, resource);
                ps.setString(2, token);
                try (ResultSet rs = ps.executeQuery()) {
                    return rs.next();
                }
            }
        }
        try (PreparedStatement ps = conn.prepareStatement(ADMIT_MYSQL, Statement.RETURN_GENERATED_KEYS)) {
            ps.setString(1, resource);
            ps.setString(2, token);
            ps.executeUpdate();
            // The statement sets LAST_INSERT_ID to 1 (admitted) or 0 (stale); the server returns it as the insert id.
            try (ResultSet keys = ps.getGeneratedKeys()) {
                return keys.next() && keys.getLong(1) == 1;
            }
        }
    }

    private static Dialect dialectOf(Connection conn) throws SQLException {
        String product = conn.getMetaData().getDatabaseProductName().toLowerCase(Locale.ROOT);
        if (product.contains("postgres")) return Dialect.POSTGRESQL;
        if (product.contains("mysql") || product.contains("mariadb")) return Dialect.MYSQL;
        throw new SQLException("monolock fence: no fence dialect for the database \"" + product
                + "\"; PostgreSQL, MySQL and MariaDB have one (pass Fences.Dialect to admit for those behind a proxy)");
    }

    private static boolean missingTable(SQLException e) {
        // PostgreSQL 42P01 undefined_table; MySQL and MariaDB 42S02, error 1146.
        return "42P01".equals(e.getSQLState()) || "42S02".equals(e.getSQLState()) || e.getErrorCode() == 1146;
    }

    private static void rollback(Connection conn, Exception why) {
        try {
            conn.rollback();
        } catch (SQLException e) {
            why.addSuppressed(e); // the first error says why; a failed rollback changes nothing for the caller
        }
    }
}
