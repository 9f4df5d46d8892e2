package testdb

import (
	"fmt"
	"path/filepath"
	"strconv"
	"syscall"
)

// PostgresUser and PostgresDatabase are the superuser and the database of
// a test PostgreSQL (trust authentication: no password).
const (
	PostgresUser     = "monolock"
	PostgresDatabase = "postgres"
)

// pgBin is where Debian's postgresql package keeps its server programs.
const pgBin = "/usr/lib/postgresql/*/bin"

// StartPostgres initialises and starts a PostgreSQL server.
func StartPostgres(opts ...Option) (*Server, error) {
	o := optionsOf(opts)
	initdb, err := binary("initdb", pgBin)
	if err != nil {
		return nil, err
	}
	postgres, err := binary("postgres", filepath.Dir(initdb), pgBin)
	if err != nil {
		return nil, err
	}
	return start("PostgreSQL", "monolock-postgres-", func(dir string, port int, cred *syscall.Credential) (*Server, error) {
		data := filepath.Join(dir, "data")
		if !exists(data) {
			if err := initialise(command(cred, initdb, "--no-sync", "--auth=trust", "--username="+PostgresUser,
				"--encoding=UTF8", "--no-instructions", "-D", data)); err != nil {
				return nil, err
			}
		}
		// No socket file outside dir, and (unless durable) no flush at
		// commit: the data is thrown away.
		args := []string{"-D", data, "-p", strconv.Itoa(port),
			"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=" + dir,
			"-c", "max_connections=" + strconv.Itoa(o.maxConnections), "-c", "shared_buffers=16MB", "-c", "logging_collector=off"}
		if !o.durable {
			args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
		}
		cmd := command(cred, postgres, args...)
		s, err := serve("PostgreSQL", dir, cmd, "database system is ready to accept connections",
			[]string{"could not bind IPv4 address", "Address already in use"})
		if err != nil {
			return nil, err
		}
		s.Port = port
		s.URL = fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", PostgresUser, port, PostgresDatabase)
		return s, nil
	})
}
