// Package fencedb is a fenced store in a real database, for the harnesses
// whose resource must be more than memory: each admit is one transaction
// that runs fence.Admit and then the guarded write, one row in a write log,
// and commits. A write lands exactly when its transaction commits, so the
// database itself says afterwards which writes landed and in which order.
//
// The order is the log's id, a bigserial (PostgreSQL) or AUTO_INCREMENT
// (MariaDB) assigned by the insert, which runs after fence.Admit took the
// resource's fence row lock: a later transaction on the same resource waits
// for that lock until the earlier one has committed, so its id is larger.
// Per resource, id order is commit order.
//
// The servers are the throwaway ones of package testdb (a port picked at
// run time, data in a temporary directory); Close removes them, and
// CloseOnSignal does so when the harness is interrupted.
package fencedb

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	_ "github.com/go-sql-driver/mysql" // database/sql driver "mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/monolock/monolock/fence"
	"github.com/monolock/monolock/internal/testsupport/testdb"
)

// Kind names a store: the value of the harnesses' -store flag.
type Kind string

// The stores a harness can write to.
const (
	Memory   Kind = "memory"
	Postgres Kind = "postgres"
	MariaDB  Kind = "mariadb"
)

// ParseKind reads a -store flag.
func ParseKind(s string) (Kind, error) {
	switch k := Kind(s); k {
	case Memory, Postgres, MariaDB:
		return k, nil
	}
	return "", fmt.Errorf("unknown store %q: use memory, postgres or mariadb", s)
}

// Dialect is the fence dialect of k (k is not Memory).
func (k Kind) Dialect() fence.Dialect {
	if k == Postgres {
		return fence.PostgreSQL
	}
	return fence.MySQL
}

// The write log: one row per landed write.
const (
	logPostgreSQL = `CREATE TABLE IF NOT EXISTS monolock_writes (
    id       bigserial PRIMARY KEY,
    resource text NOT NULL,
    token    numeric(20,0) NOT NULL
)`
	logMySQL = `CREATE TABLE IF NOT EXISTS monolock_writes (
    id       BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY,
    resource VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    token    BIGINT UNSIGNED NOT NULL
) ENGINE=InnoDB`
	insertPostgreSQL = `INSERT INTO monolock_writes (resource, token) VALUES ($1, $2::numeric(20,0))`
	insertMySQL      = `INSERT INTO monolock_writes (resource, token) VALUES (?, CAST(? AS UNSIGNED))`
)

// Store is a fence.Fence whose admits are guarded writes in a database.
type Store struct {
	db      *sql.DB
	dialect fence.Dialect
	server  *testdb.Server
}

// Start starts a throwaway server of kind k (Postgres or MariaDB), creates
// the fence table and the write log, and returns the store.
func Start(k Kind) (*Store, error) {
	var srv *testdb.Server
	var err error
	switch k {
	case Postgres:
		srv, err = testdb.StartPostgres()
	case MariaDB:
		srv, err = testdb.StartMariaDB()
	default:
		return nil, fmt.Errorf("fencedb: no database for store %q", k)
	}
	if err != nil {
		return nil, err
	}
	s, err := Open(srv.URL, k.Dialect())
	if err != nil {
		_ = srv.Close()
		return nil, err
	}
	s.server = srv
	return s, nil
}

// Open opens the database at rawURL (the form of testdb's URLs) and creates
// the fence table and the write log in it.
func Open(rawURL string, d fence.Dialect) (*Store, error) {
	driver, dsn, err := DSN(rawURL, d)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, fmt.Errorf("fencedb: open %s: %w", rawURL, err)
	}
	logDDL := logPostgreSQL
	if d == fence.MySQL {
		logDDL = logMySQL
	}
	for _, ddl := range []string{fence.Schema(d), logDDL} {
		if _, err := db.Exec(ddl); err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("fencedb: create the tables: %w", err)
		}
	}
	return &Store{db: db, dialect: d}, nil
}

// DSN turns a testdb URL into a database/sql driver name and data source.
func DSN(rawURL string, d fence.Dialect) (driver, dsn string, err error) {
	if d == fence.PostgreSQL {
		return "pgx", rawURL, nil
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", "", fmt.Errorf("fencedb: %q: %w", rawURL, err)
	}
	return "mysql", fmt.Sprintf("%s@tcp(%s)/%s", u.User.String(), u.Host, strings.TrimPrefix(u.Path, "/")), nil
}

// DB is the store's database.
func (s *Store) DB() *sql.DB { return s.db }

// Close closes the database and, when Start started it, kills the server
// and removes its data.
func (s *Store) Close() error {
	err := s.db.Close()
	if s.server != nil {
		if cerr := s.server.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// CloseOnSignal closes the store and exits with status 2 when the process
// gets SIGINT or SIGTERM, so an interrupted run leaves no server or data
// behind (deferred calls do not run on a signal). Call the returned stop
// once the store is closed the ordinary way.
func (s *Store) CloseOnSignal(name string) (stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-sigs:
			fmt.Fprintf(os.Stderr, "%s: %v: removing the database\n", name, sig)
			_ = s.Close()
			os.Exit(2)
		case <-done:
		}
	}()
	return func() { signal.Stop(sigs); close(done) }
}

// Admit implements fence.Fence: in one transaction, fence.Admit and then
// the guarded write, one row (resource, token) in the write log. A stale
// token rolls the transaction back, so its row never lands.
func (s *Store) Admit(ctx context.Context, resource string, token uint64) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("fencedb: begin the write of token %d for %q: %w", token, resource, err)
	}
	if err := fence.Admit(ctx, tx, s.dialect, resource, token); err != nil {
		return err // Admit rolled tx back
	}
	insert := insertPostgreSQL
	if s.dialect == fence.MySQL {
		insert = insertMySQL
	}
	if _, err := tx.ExecContext(ctx, insert, resource, strconv.FormatUint(token, 10)); err != nil {
		_ = tx.Rollback()
		return fmt.Errorf("fencedb: write token %d for %q: %w", token, resource, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("fencedb: commit the write of token %d for %q: %w", token, resource, err)
	}
	return nil
}

// Landed is what the write log says about one resource.
type Landed struct {
	Writes int // rows
	// Stale counts the rows whose token is below a token that landed
	// earlier (by id) for the same resource: stale writes that landed.
	Stale int
}

// Landed reads the write log in id order and returns, per resource, the
// writes that landed and the stale ones among them.
func (s *Store) Landed(ctx context.Context) (map[string]Landed, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT resource, token FROM monolock_writes ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("fencedb: read the write log: %w", err)
	}
	defer rows.Close()
	highest := map[string]uint64{}
	out := map[string]Landed{}
	for rows.Next() {
		var resource, text string
		if err := rows.Scan(&resource, &text); err != nil {
			return nil, fmt.Errorf("fencedb: read the write log: %w", err)
		}
		token, err := strconv.ParseUint(text, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("fencedb: the write log holds token %q for %q: %w", text, resource, err)
		}
		l := out[resource]
		l.Writes++
		if token < highest[resource] {
			l.Stale++
		}
		highest[resource] = max(highest[resource], token)
		out[resource] = l
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("fencedb: read the write log: %w", err)
	}
	return out, nil
}
