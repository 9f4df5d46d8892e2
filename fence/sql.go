package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Dialect names the SQL of a database: the same names in every monolock
// client.
type Dialect string

// The dialects Schema and Admit speak.
const (
	PostgreSQL Dialect = "postgresql"
	MySQL      Dialect = "mysql" // MySQL and MariaDB
)

// TableName is the fence table Schema creates and Admit writes.
const TableName = "monolock_fence"

// ErrNoTable is wrapped by Admit's error when the fence table does not
// exist: create it with the statement Schema returns.
var ErrNoTable = errors.New("fence: the fence table " + TableName + " does not exist")

// Schema returns the statement that creates the fence table for d: one row
// per guarded resource, the token column holding the whole unsigned 64-bit
// range in order (numeric(20,0) on PostgreSQL, BIGINT UNSIGNED on MySQL and
// MariaDB; never a signed bigint). It is one statement and safe to run again.
// It panics for a dialect other than PostgreSQL and MySQL, a programming
// error.
func Schema(d Dialect) string {
	switch d {
	case PostgreSQL:
		return schemaPostgreSQL
	case MySQL:
		return schemaMySQL
	}
	panic(fmt.Sprintf("fence: unknown dialect %q: use fence.PostgreSQL or fence.MySQL", string(d)))
}

const schemaPostgreSQL = `CREATE TABLE IF NOT EXISTS monolock_fence (
    resource text PRIMARY KEY,
    token    numeric(20,0) NOT NULL CHECK (token BETWEEN 1 AND 18446744073709551615)
)`

// The resource is compared byte for byte (utf8mb4_bin): lock names are
// case-sensitive, and a case-insensitive collation would share one row
// between two locks.
const schemaMySQL = `CREATE TABLE IF NOT EXISTS monolock_fence (
    resource VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    token    BIGINT UNSIGNED NOT NULL
) ENGINE=InnoDB`

// AdmitStatement returns the admit statement for d, for code that runs it
// without this package (docs/fencing.md explains it). Its parameters are the
// resource and the token as decimal text.
//
// On PostgreSQL it returns one row when the token is admitted and no row
// when it is stale. On MySQL it sets LAST_INSERT_ID to 1 when the token is
// admitted and to 0 when it is stale; the driver reports it as the
// statement's insert id (the affected-row count cannot tell, as it depends
// on the client's FOUND_ROWS flag). It panics for an unknown dialect.
func AdmitStatement(d Dialect) string {
	switch d {
	case PostgreSQL:
		return admitPostgreSQL
	case MySQL:
		return admitMySQL
	}
	panic(fmt.Sprintf("fence: unknown dialect %q: use fence.PostgreSQL or fence.MySQL", string(d)))
}

// ON CONFLICT DO UPDATE locks the row even when its WHERE is false, so a
// refused admit also holds the row until its transaction ends.
const admitPostgreSQL = `INSERT INTO monolock_fence AS f (resource, token) VALUES ($1, $2::numeric(20,0))
ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token WHERE f.token <= EXCLUDED.token
RETURNING 1`

// The insert sets LAST_INSERT_ID(1) while it builds the row; on a duplicate
// the update's IF sets it again, to whether the stored token is <= the new
// one, and keeps the stored token when it is not.
const admitMySQL = `INSERT INTO monolock_fence (resource, token) VALUES (?, IF(LAST_INSERT_ID(1), CAST(? AS UNSIGNED), 0))
ON DUPLICATE KEY UPDATE token = IF(LAST_INSERT_ID(token <= VALUES(token)), VALUES(token), token)`

// Admit runs the admit statement for resource and token inside tx, the
// transaction that does the guarded write: one statement, one round trip.
// It records token when it is greater than or equal to the stored one (or
// when the resource has no row yet) and returns nil.
//
// The row lock the statement takes is held until tx ends, so a newer
// holder's Admit for the same resource waits until this transaction has
// committed or rolled back, and then sees its token.
//
// When Admit does not admit, it rolls tx back before it returns, on every
// dialect: a stale token (the error wraps ErrStale and is a *StaleError), a
// missing fence table (it wraps ErrNoTable) or any other failure. Nothing
// done in tx lands, and tx's later Exec and Commit return sql.ErrTxDone.
// (PostgreSQL would abort the transaction after a failed statement by
// itself; MySQL keeps it open, and a stale admit is no failed statement on
// either, so Admit ends it in all cases.)
func Admit(ctx context.Context, tx *sql.Tx, d Dialect, resource string, token uint64) error {
	err := admit(ctx, tx, d, resource, token)
	if err != nil {
		_ = tx.Rollback() // the error says why; a failed rollback changes nothing for the caller
	}
	return err
}

func admit(ctx context.Context, tx *sql.Tx, d Dialect, resource string, token uint64) error {
	if d != PostgreSQL && d != MySQL {
		return fmt.Errorf("fence: unknown dialect %q: use fence.PostgreSQL or fence.MySQL", string(d))
	}
	if token == 0 {
		return &StaleError{Resource: resource, Token: 0}
	}
	// database/sql refuses uint64 values ≥ 2^63: the token crosses the
	// driver as decimal text and the statement casts it.
	text := strconv.FormatUint(token, 10)
	admitted, err := run(ctx, tx, d, resource, text)
	if err != nil {
		if missingTable(err) {
			return fmt.Errorf("%w: create it with fence.Schema(%q) (%v)", ErrNoTable, string(d), err)
		}
		return fmt.Errorf("fence: admit token %d for %q: %w", token, resource, err)
	}
	if !admitted {
		return &StaleError{Resource: resource, Token: token}
	}
	return nil
}

func run(ctx context.Context, tx *sql.Tx, d Dialect, resource, token string) (bool, error) {
	if d == PostgreSQL {
		var one int
		err := tx.QueryRowContext(ctx, admitPostgreSQL, resource, token).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return false, nil
		}
		return err == nil, err
	}
	res, err := tx.ExecContext(ctx, admitMySQL, resource, token)
	if err != nil {
		return false, err
	}
	flag, err := res.LastInsertId()
	if err != nil {
		return false, fmt.Errorf("the driver does not report the insert id the MySQL admit statement sets: %w", err)
	}
	return flag == 1, nil
}

// missingTable tells a missing fence table from other errors by the
// server's text, the one thing every driver passes on: PostgreSQL says
// `relation "monolock_fence" does not exist` (42P01), MySQL and MariaDB
// `Table 'db.monolock_fence' doesn't exist` (1146).
func missingTable(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, TableName) && (strings.Contains(msg, "does not exist") || strings.Contains(msg, "doesn't exist"))
}
