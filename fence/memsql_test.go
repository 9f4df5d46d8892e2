package fence_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/monolock/monolock/fence"
)

// memPostgres is a stand-in for a PostgreSQL server, for the examples: a
// database/sql driver that keeps the fence table and the reports table in
// memory and understands only the statements the examples send (the admit
// statement of fence.AdmitStatement(fence.PostgreSQL) and an INSERT INTO
// reports). Transactions run one at a time, as the admit's row lock would
// order them; their changes land at Commit and are dropped at Rollback.
type memPostgres struct {
	tx      sync.Mutex // held from Begin to Commit or Rollback
	mu      sync.Mutex // guards the tables
	fence   map[string]uint64
	reports []string
}

// openMemPostgres returns a *sql.DB on a fresh memPostgres.
func openMemPostgres() (*sql.DB, *memPostgres) {
	m := &memPostgres{fence: map[string]uint64{}}
	return sql.OpenDB(m), m
}

// Reports is the committed reports table.
func (m *memPostgres) Reports() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.reports...)
}

// memPostgres is its own driver.Connector and driver.Driver.
func (m *memPostgres) Connect(context.Context) (driver.Conn, error) { return &memConn{db: m}, nil }
func (m *memPostgres) Driver() driver.Driver                        { return m }
func (m *memPostgres) Open(string) (driver.Conn, error)             { return &memConn{db: m}, nil }

// memConn is one connection; tx is its open transaction, if any.
type memConn struct {
	db *memPostgres
	tx *memTx
}

var errMemStatement = errors.New("memPostgres: the examples' stand-in understands only the admit statement and INSERT INTO reports")

func (c *memConn) Prepare(string) (driver.Stmt, error) { return nil, errMemStatement }
func (c *memConn) Close() error                        { return nil }
func (c *memConn) Begin() (driver.Tx, error) {
	c.db.tx.Lock()
	c.tx = &memTx{conn: c, fence: map[string]uint64{}}
	return c.tx, nil
}

func (c *memConn) QueryContext(_ context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if c.tx == nil || query != fence.AdmitStatement(fence.PostgreSQL) || len(args) != 2 {
		return nil, errMemStatement
	}
	resource, _ := args[0].Value.(string)
	text, _ := args[1].Value.(string)
	token, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("memPostgres: token %q: %w", text, err)
	}
	c.db.mu.Lock()
	stored := c.db.fence[resource]
	c.db.mu.Unlock()
	if pending, ok := c.tx.fence[resource]; ok {
		stored = pending
	}
	if stored > token {
		return &memRows{}, nil // ON CONFLICT ... WHERE false: no row returned
	}
	c.tx.fence[resource] = token
	return &memRows{left: 1}, nil
}

func (c *memConn) ExecContext(_ context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if c.tx == nil || !strings.HasPrefix(query, "INSERT INTO reports") || len(args) != 1 {
		return nil, errMemStatement
	}
	body, _ := args[0].Value.(string)
	c.tx.reports = append(c.tx.reports, body)
	return driver.RowsAffected(1), nil
}

// memTx holds a transaction's changes until Commit.
type memTx struct {
	conn    *memConn
	fence   map[string]uint64
	reports []string
}

func (t *memTx) Commit() error {
	db := t.conn.db
	db.mu.Lock()
	for r, token := range t.fence {
		db.fence[r] = token
	}
	db.reports = append(db.reports, t.reports...)
	db.mu.Unlock()
	return t.end()
}

func (t *memTx) Rollback() error { return t.end() }

func (t *memTx) end() error {
	t.conn.tx = nil
	t.conn.db.tx.Unlock()
	return nil
}

// memRows is the admit statement's answer: left rows holding 1.
type memRows struct{ left int }

func (r *memRows) Columns() []string { return []string{"?column?"} }
func (r *memRows) Close() error      { return nil }
func (r *memRows) Next(dest []driver.Value) error {
	if r.left == 0 {
		return io.EOF
	}
	r.left--
	dest[0] = int64(1)
	return nil
}
