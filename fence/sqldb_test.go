package fence_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/monolock/monolock/fence"
)

// The servers come from the environment (make test runs these tests under
// internal/testsupport/testdb/withdb, which starts both); without it the
// tests skip.
const (
	envPostgres = "MONOLOCK_TEST_POSTGRES"
	envMySQL    = "MONOLOCK_TEST_MYSQL"
)

var dialects = []fence.Dialect{fence.PostgreSQL, fence.MySQL}

// openDB opens the test server of d, with the fence table in place.
func openDB(t *testing.T, d fence.Dialect) *sql.DB {
	t.Helper()
	db := openRaw(t, d, "")
	if _, err := db.Exec(fence.Schema(d)); err != nil {
		t.Fatalf("create the fence table: %v", err)
	}
	return db
}

// openRaw opens the test server of d; database, when set, names a database
// (MySQL) or schema (PostgreSQL) other than the default; params are added to
// a MySQL DSN.
func openRaw(t *testing.T, d fence.Dialect, database string, params ...string) *sql.DB {
	t.Helper()
	env := envPostgres
	if d == fence.MySQL {
		env = envMySQL
	}
	raw := os.Getenv(env)
	if raw == "" {
		t.Skipf("%s is not set: run under internal/testsupport/testdb/withdb (make test does)", env)
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("%s=%q: %v", env, raw, err)
	}
	var db *sql.DB
	if d == fence.PostgreSQL {
		if database != "" {
			q := u.Query()
			q.Set("search_path", database)
			u.RawQuery = q.Encode()
		}
		db, err = sql.Open("pgx", u.String())
	} else {
		name := strings.TrimPrefix(u.Path, "/")
		if database != "" {
			name = database
		}
		dsn := fmt.Sprintf("%s@tcp(%s)/%s", u.User.String(), u.Host, name)
		if len(params) > 0 {
			dsn += "?" + strings.Join(params, "&")
		}
		db, err = sql.Open("mysql", dsn)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// openEmpty opens the test server of d in the schema (PostgreSQL) or
// database (MySQL) name, created when missing: a place without the fence
// unless the test sets it up.
func openEmpty(t *testing.T, d fence.Dialect, name string) *sql.DB {
	t.Helper()
	create := "CREATE SCHEMA IF NOT EXISTS " + name
	if d == fence.MySQL {
		create = "CREATE DATABASE IF NOT EXISTS " + name
	}
	if _, err := openRaw(t, d, "").Exec(create); err != nil {
		t.Fatal(err)
	}
	return openRaw(t, d, name)
}

// isolationLevels are the default level and READ COMMITTED, for each
// dialect: PostgreSQL's default is READ COMMITTED, so its second is
// REPEATABLE READ; MySQL's and MariaDB's default is REPEATABLE READ.
func isolationLevels(d fence.Dialect) []sql.IsolationLevel {
	if d == fence.PostgreSQL {
		return []sql.IsolationLevel{sql.LevelDefault, sql.LevelRepeatableRead}
	}
	return []sql.IsolationLevel{sql.LevelDefault, sql.LevelReadCommitted}
}

func levelName(l sql.IsolationLevel) string {
	if l == sql.LevelDefault {
		return "default"
	}
	return strings.ReplaceAll(l.String(), " ", "")
}

// resourceName is unique per test and dialect, so that tests share one
// fence table.
func resourceName(t *testing.T) string {
	return fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano())
}

// stored reads the token stored for resource as decimal text ("" without a
// row).
func stored(t *testing.T, db *sql.DB, d fence.Dialect, resource string) string {
	t.Helper()
	q := "SELECT token::text FROM monolock_fence WHERE resource = $1"
	if d == fence.MySQL {
		q = "SELECT CAST(token AS CHAR) FROM monolock_fence WHERE resource = ?"
	}
	var s string
	err := db.QueryRow(q, resource).Scan(&s)
	if err == sql.ErrNoRows {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func forEachDialect(t *testing.T, f func(t *testing.T, d fence.Dialect, db *sql.DB)) {
	for _, d := range dialects {
		t.Run(string(d), func(t *testing.T) { f(t, d, openDB(t, d)) })
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
