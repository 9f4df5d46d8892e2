package peers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/monolock/monolock/bench/check"
	"github.com/monolock/monolock/internal/testsupport/testdb"
)

// PostgreSQL: session-level advisory locks, pg_advisory_lock(hashtext(name))
// and pg_advisory_unlock, on one connection per worker. There is no lease: a
// lock lives as long as the session that took it.

type PostgresPeer struct {
	srv     *testdb.Server
	logPath string
	dsn     string
	version string
}

// pgMaxConnections is room for a connection per worker and per waiter of
// the largest scenario, and the checks' own.
const pgMaxConnections = 200

// startPostgres starts a throwaway PostgreSQL as every test and benchmark
// of the repository does (package testdb: Debian's binaries, a port picked
// at run time, data in a temporary directory, no flush at commit). Its last
// lines of output go to logPath when it stops.
func startPostgres(logPath string) (*PostgresPeer, error) {
	srv, err := testdb.StartPostgres(testdb.MaxConnections(pgMaxConnections))
	if err != nil {
		if errors.Is(err, testdb.ErrNotInstalled) {
			return nil, errSkip(err.Error())
		}
		return nil, fmt.Errorf("postgres: %w", err)
	}
	p := &PostgresPeer{srv: srv, logPath: logPath, dsn: srv.URL}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, p.dsn)
	if err == nil {
		err = c.QueryRow(ctx, "show server_version").Scan(&p.version)
		_ = c.Close(context.Background())
	}
	if err != nil {
		p.Stop()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return p, nil
}

func (p *PostgresPeer) Name() string    { return "postgres" }
func (p *PostgresPeer) Version() string { return p.version }

// Stop kills the server and removes its data; its output's tail is kept.
func (p *PostgresPeer) Stop() {
	_ = p.srv.Close()
	if p.logPath != "" {
		_ = os.WriteFile(p.logPath, []byte(p.srv.Log()+"\n"), 0o644)
	}
}

func (p *PostgresPeer) NewClient(ctx context.Context, _ int) (Client, error) {
	c, err := pgx.Connect(ctx, p.dsn)
	if err != nil {
		return nil, err
	}
	return &pgClient{c: c}, nil
}

func (p *PostgresPeer) Expiry(context.Context, time.Duration, int, *check.Checker) (ExpiryResult, error) {
	return ExpiryResult{}, ErrNoLease
}

type pgClient struct{ c *pgx.Conn }

func (c *pgClient) Lock(ctx context.Context, name string) (uint64, bool, error) {
	_, err := c.c.Exec(ctx, "select pg_advisory_lock(hashtext($1))", name)
	return 0, false, err
}

func (c *pgClient) Unlock(ctx context.Context, name string) error {
	var ok bool
	if err := c.c.QueryRow(ctx, "select pg_advisory_unlock(hashtext($1))", name).Scan(&ok); err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("postgres: pg_advisory_unlock(%q) found no lock held", name)
	}
	return nil
}

func (c *pgClient) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = c.c.Close(ctx)
}
