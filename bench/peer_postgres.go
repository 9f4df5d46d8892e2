package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/monolock/monolock/internal/testsupport/proc"
)

// PostgreSQL: session-level advisory locks, pg_advisory_lock(hashtext(name))
// and pg_advisory_unlock, on one connection per worker. There is no lease: a
// lock lives as long as the session that took it.

type pgPeer struct {
	proc    *peerProc
	dsn     string
	version string
}

// postgresBinDir finds the newest /usr/lib/postgresql/<major>/bin.
func postgresBinDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	var best string
	bestMajor := -1
	for _, d := range dirs {
		major, err := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		if err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "postgres")); err != nil {
			continue
		}
		if major > bestMajor {
			best, bestMajor = d, major
		}
	}
	if best == "" {
		if p, err := exec.LookPath("postgres"); err == nil {
			return filepath.Dir(p), nil
		}
		return "", errSkip("postgres is not installed (package postgresql; make bench-peers)")
	}
	return best, nil
}

func startPostgres(procs *proc.Group, tmp, logPath string) (*pgPeer, error) {
	bindir, err := postgresBinDir()
	if err != nil {
		return nil, err
	}
	// PostgreSQL refuses to run as root: run it as the postgres user.
	var cred *syscall.Credential
	uid, gid := -1, -1
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, errSkip("running as root and there is no postgres user to run PostgreSQL as")
		}
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	dir := filepath.Join(tmp, "postgres")
	data := filepath.Join(dir, "data")
	sock := filepath.Join(dir, "sock")
	for _, d := range []string{dir, sock} {
		if err := mkdirAll(d); err != nil {
			return nil, err
		}
		if uid >= 0 {
			if err := os.Chown(d, uid, gid); err != nil {
				return nil, err
			}
		}
	}
	initLog := logPath + ".initdb"
	initdb, err := startPeerProc(procs, "initdb", filepath.Join(bindir, "initdb"),
		[]string{"-D", data, "-U", "bench", "-A", "trust", "-E", "UTF8", "--no-sync", "--no-instructions"},
		initLog, cred, syscall.SIGTERM, "")
	if err != nil {
		return nil, err
	}
	select {
	case <-initdb.Done():
	case <-time.After(60 * time.Second):
		initdb.Stop()
		return nil, fmt.Errorf("postgres: initdb took over a minute")
	}
	if initdb.Err() != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("postgres: initdb: %v (see %s)", initdb.Err(), initLog)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	// SIGINT is the "fast" shutdown: it does not wait for clients.
	proc, err := startPeerProc(procs, "postgres", filepath.Join(bindir, "postgres"), []string{
		"-D", data, "-p", strconv.Itoa(port), "-k", sock,
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
	}, logPath, cred, syscall.SIGINT, dir)
	if err != nil {
		return nil, err
	}
	p := &pgPeer{proc: proc, dsn: fmt.Sprintf("postgres://bench@127.0.0.1:%d/postgres?sslmode=disable", port)}
	err = waitFor(proc, 30*time.Second, func(ctx context.Context) error {
		c, err := pgx.Connect(ctx, p.dsn)
		if err != nil {
			return err
		}
		defer func() { _ = c.Close(context.Background()) }()
		return c.QueryRow(ctx, "show server_version").Scan(&p.version)
	})
	if err != nil {
		proc.Stop()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return p, nil
}

func (p *pgPeer) Name() string    { return "postgres" }
func (p *pgPeer) Version() string { return p.version }
func (p *pgPeer) Stop()           { p.proc.Stop() }

func (p *pgPeer) NewClient(ctx context.Context, _ int) (peerClient, error) {
	c, err := pgx.Connect(ctx, p.dsn)
	if err != nil {
		return nil, err
	}
	return &pgClient{c: c}, nil
}

func (p *pgPeer) Expiry(context.Context, time.Duration, int, *Checker) (expiryResult, error) {
	return expiryResult{}, errNoLease
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
