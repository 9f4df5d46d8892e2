package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// FunctionName is the admit function AdmitFunction creates.
const FunctionName = "monolock_admit"

// ErrNoFunction is wrapped by ExecAdmitted's error when the admit function
// does not exist: create it with the statements AdmitFunction returns.
var ErrNoFunction = errors.New("fence: the admit function " + FunctionName + " does not exist")

// StaleSQLState is the SQLSTATE the PostgreSQL admit function raises for a
// stale token. (MySQL and MariaDB signal '45000', the state of every
// user-defined error there; the message names the fence on both.)
const StaleSQLState = "ML001"

// staleMessage begins the message the admit function fails with on a stale
// token, on both dialects; the largest admitted token follows "token N was
// admitted".
const staleMessage = "monolock fence: stale token "

var staleHighest = regexp.MustCompile(`token (\d+) was admitted`)

// AdmitFunction returns the statements that create the admit function for
// d, to run in order after Schema(d); they replace the function when it
// exists, so they are safe to run again. The function, monolock_admit(resource,
// token), is the admit statement as an SQL boolean function: it records
// token for resource in the fence table when it is greater than or equal to
// the stored one and returns true, and fails the statement that called it
// when it is not (PostgreSQL: SQLSTATE ML001, StaleSQLState; MySQL and
// MariaDB: SQLSTATE 45000), so that the admit rides in the caller's own write
// statement (see AdmitCall) and costs no round trip of its own.
//
// On MySQL and MariaDB with binary logging on, creating a function that
// writes needs the server's log_bin_trust_function_creators=1 (else error
// 1418); docs/fencing.md says more. It panics for an unknown dialect.
func AdmitFunction(d Dialect) []string {
	switch d {
	case PostgreSQL:
		return []string{functionPostgreSQL}
	case MySQL:
		return []string{"DROP FUNCTION IF EXISTS " + FunctionName, functionMySQL}
	}
	panic(fmt.Sprintf("fence: unknown dialect %q: use fence.PostgreSQL or fence.MySQL", string(d)))
}

// Both functions read the fence row with a locking read first: the lock
// orders holders as the admit statement's does, and the common case, the
// same holder writing again under its token, then writes nothing more. A
// larger token updates the row; a resource without a row gets one from the
// admit statement's upsert, whose WHERE settles a race with another first
// admit.

// The parameters are named as the columns are; use_column makes the plain
// names the columns and monolock_admit.x the parameters.
const functionPostgreSQL = `CREATE OR REPLACE FUNCTION monolock_admit(resource text, token numeric) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
    highest numeric;
BEGIN
    IF monolock_admit.token IS NULL OR monolock_admit.token < 1 THEN
        RAISE EXCEPTION 'monolock fence: stale token 0 (never issued) for %', monolock_admit.resource
            USING ERRCODE = 'ML001';
    END IF;
    SELECT f.token INTO highest FROM monolock_fence AS f WHERE f.resource = monolock_admit.resource FOR UPDATE;
    IF highest = monolock_admit.token THEN
        RETURN true;
    ELSIF highest < monolock_admit.token THEN
        UPDATE monolock_fence AS f SET token = monolock_admit.token WHERE f.resource = monolock_admit.resource;
        RETURN true;
    ELSIF highest IS NULL THEN
        INSERT INTO monolock_fence AS f (resource, token) VALUES (monolock_admit.resource, monolock_admit.token)
        ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token WHERE f.token <= EXCLUDED.token;
        IF FOUND THEN
            RETURN true;
        END IF;
        SELECT f.token INTO highest FROM monolock_fence AS f WHERE f.resource = monolock_admit.resource;
    END IF;
    RAISE EXCEPTION 'monolock fence: stale token % (token % was admitted) for %',
        monolock_admit.token, highest, monolock_admit.resource
        USING ERRCODE = 'ML001';
END $$`

// In MySQL a routine's parameters shadow columns of the same name, hence
// p_; a SELECT … INTO that finds no row leaves highest NULL. MESSAGE_TEXT
// holds 128 characters: the resource comes last, so a long name is what is
// cut.
const functionMySQL = `CREATE FUNCTION monolock_admit(p_resource VARCHAR(255) CHARACTER SET utf8mb4, p_token BIGINT UNSIGNED) RETURNS BOOLEAN
NOT DETERMINISTIC MODIFIES SQL DATA
BEGIN
    DECLARE highest BIGINT UNSIGNED DEFAULT NULL;
    DECLARE msg VARCHAR(128);
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET highest = NULL;
    IF p_token IS NULL OR p_token = 0 THEN
        SET msg = LEFT(CONCAT('monolock fence: stale token 0 (never issued) for ', p_resource), 128);
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = msg;
    END IF;
    SELECT token INTO highest FROM monolock_fence WHERE resource = p_resource COLLATE utf8mb4_bin FOR UPDATE;
    IF highest = p_token THEN
        RETURN TRUE;
    ELSEIF highest < p_token THEN
        UPDATE monolock_fence SET token = p_token WHERE resource = p_resource COLLATE utf8mb4_bin;
        RETURN TRUE;
    ELSEIF highest IS NULL THEN
        INSERT INTO monolock_fence (resource, token) VALUES (p_resource, p_token)
        ON DUPLICATE KEY UPDATE token = IF(token <= VALUES(token), VALUES(token), token);
        SELECT token INTO highest FROM monolock_fence WHERE resource = p_resource COLLATE utf8mb4_bin FOR UPDATE;
        IF highest = p_token THEN
            RETURN TRUE;
        END IF;
    END IF;
    SET msg = LEFT(CONCAT('monolock fence: stale token ', p_token, ' (token ', highest, ' was admitted) for ', p_resource), 128);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = msg;
    RETURN FALSE;
END`

// AdmitCall returns the call of the admit function for d, a boolean SQL
// expression to put in the WHERE of the guarded write, whose parameters are
// the statement's last two: the resource, then the token as decimal text
// (ExecAdmitted appends both). first is the number of the resource's
// placeholder on PostgreSQL ($first, $first+1); MySQL's ? placeholders have
// no number and ignore it. For example, with PostgreSQL:
//
//	INSERT INTO reports (day, body) SELECT $1, $2 WHERE monolock_admit($3, $4::numeric)
//	UPDATE accounts SET balance = $1 WHERE id = $2 AND monolock_admit($3, $4::numeric)
//
// and with MySQL and MariaDB:
//
//	INSERT INTO reports (day, body) SELECT ?, ? FROM DUAL WHERE monolock_admit(?, CAST(? AS UNSIGNED))
//
// It panics for an unknown dialect.
func AdmitCall(d Dialect, first int) string {
	switch d {
	case PostgreSQL:
		return fmt.Sprintf("%s($%d, $%d::numeric)", FunctionName, first, first+1)
	case MySQL:
		return FunctionName + "(?, CAST(? AS UNSIGNED))"
	}
	panic(fmt.Sprintf("fence: unknown dialect %q: use fence.PostgreSQL or fence.MySQL", string(d)))
}

// ExecAdmitted runs query, a write statement whose WHERE calls AdmitCall(d,
// len(args)+1), inside tx with args and then resource and token: the admit
// and the write are one statement and one round trip. The function's row
// lock orders holders as Admit's does, at the same isolation levels.
//
// A stale token fails the statement, so nothing of it lands; ExecAdmitted
// then rolls tx back and returns a *StaleError (errors.Is(err, ErrStale)).
// It rolls tx back on every other failure too: a missing fence table (the
// error wraps ErrNoTable), a missing admit function (ErrNoFunction) or any
// other. Where the statement calls the function for no row (an UPDATE
// whose other conditions match none), nothing is admitted and nothing
// written, and the result says 0 rows.
func ExecAdmitted(ctx context.Context, tx *sql.Tx, d Dialect, resource string, token uint64, query string, args ...any) (sql.Result, error) {
	res, err := execAdmitted(ctx, tx, d, resource, token, query, args)
	if err != nil {
		_ = tx.Rollback() // the error says why; a failed rollback changes nothing for the caller
	}
	return res, err
}

func execAdmitted(ctx context.Context, tx *sql.Tx, d Dialect, resource string, token uint64, query string, args []any) (sql.Result, error) {
	if d != PostgreSQL && d != MySQL {
		return nil, fmt.Errorf("fence: unknown dialect %q: use fence.PostgreSQL or fence.MySQL", string(d))
	}
	if token == 0 {
		return nil, &StaleError{Resource: resource, Token: 0}
	}
	all := make([]any, 0, len(args)+2)
	all = append(all, args...)
	all = append(all, resource, strconv.FormatUint(token, 10))
	res, err := tx.ExecContext(ctx, query, all...)
	if err != nil {
		return nil, AdmitError(d, err, resource, token)
	}
	return res, nil
}

// AdmitError tells what the error of a statement that calls the admit
// function means, for code that runs the statement itself: a *StaleError
// when the token was stale, an error wrapping ErrNoTable or ErrNoFunction
// (saying what to run) when the fence is not set up, else err with the
// resource and token for context. It does not roll back. nil stays nil.
func AdmitError(d Dialect, err error, resource string, token uint64) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, staleMessage):
		se := &StaleError{Resource: resource, Token: token}
		if m := staleHighest.FindStringSubmatch(msg); m != nil {
			se.Highest, _ = strconv.ParseUint(m[1], 10, 64)
		}
		return se
	case missingTable(err):
		return fmt.Errorf("%w: create it with fence.Schema(%q) (%v)", ErrNoTable, string(d), err)
	case strings.Contains(msg, FunctionName) && strings.Contains(msg, "does not exist"):
		// PostgreSQL: `function monolock_admit(unknown, numeric) does not
		// exist` (42883); MySQL and MariaDB: `FUNCTION db.monolock_admit
		// does not exist` (1305).
		return fmt.Errorf("%w: create it with the statements of fence.AdmitFunction(%q), after fence.Schema(%q) (%v)", ErrNoFunction, string(d), string(d), err)
	}
	return fmt.Errorf("fence: write admitting token %d for %q: %w", token, resource, err)
}
