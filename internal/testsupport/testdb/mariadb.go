package testdb

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// MySQLUser and MySQLDatabase are the user (no password) and the database
// of a test MariaDB.
const (
	MySQLUser     = "root"
	MySQLDatabase = "monolock_test"
)

// StartMariaDB initialises and starts a MariaDB server.
func StartMariaDB(opts ...Option) (*Server, error) {
	flushAtCommit := "0" // the redo log written about once a second: the data is thrown away
	if optionsOf(opts).durable {
		flushAtCommit = "1" // written and synced at each commit, InnoDB's default
	}
	install, err := binary("mariadb-install-db")
	if err != nil {
		return nil, err
	}
	mariadbd, err := binary("mariadbd", "/usr/sbin")
	if err != nil {
		return nil, err
	}
	return start("MariaDB", "monolock-mariadb-", func(dir string, port int, cred *syscall.Credential) (*Server, error) {
		data := filepath.Join(dir, "data")
		initFile := filepath.Join(dir, "init.sql")
		if !exists(data) {
			// normal root authentication: root@localhost and root@127.0.0.1
			// without a password (the default is the unix socket's peer).
			if err := initialise(command(cred, install, "--no-defaults", "--datadir="+data,
				"--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve")); err != nil {
				return nil, err
			}
			if err := os.WriteFile(initFile, []byte("CREATE DATABASE IF NOT EXISTS "+MySQLDatabase+";\n"), 0o644); err != nil {
				return nil, err
			}
		}
		cmd := command(cred, mariadbd, "--no-defaults", "--datadir="+data, "--port="+strconv.Itoa(port),
			"--bind-address=127.0.0.1", "--socket="+filepath.Join(dir, "mariadb.sock"),
			"--pid-file="+filepath.Join(dir, "mariadb.pid"), "--skip-name-resolve", "--skip-log-bin",
			"--init-file="+initFile, "--innodb-flush-log-at-trx-commit="+flushAtCommit, "--innodb-buffer-pool-size=32M",
			"--innodb-log-file-size=16M", "--max-connections=50", "--open-files-limit=1024")
		s, err := serve("MariaDB", dir, cmd, "ready for connections", []string{"Do you already have another", "Address already in use"})
		if err != nil {
			return nil, err
		}
		s.Port = port
		s.URL = fmt.Sprintf("mysql://%s@127.0.0.1:%d/%s", MySQLUser, port, MySQLDatabase)
		return s, nil
	})
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
