// Command withdb runs a command beside a throwaway PostgreSQL and MariaDB
// (package testdb), with their URLs in the environment:
//
//	MONOLOCK_TEST_POSTGRES=postgres://monolock@127.0.0.1:PORT/postgres?sslmode=disable
//	MONOLOCK_TEST_MYSQL=mysql://root@127.0.0.1:PORT/monolock_test
//
// and removes both when the command ends or fails, and when withdb is
// interrupted or terminated (it passes the signal on and waits for the
// command). Killed outright, withdb takes the servers with it (Pdeathsig),
// but their temporary directories stay behind.
// It exits with the command's status. The fence tests of every language run
// under it:
//
//	go run ./internal/testsupport/testdb/withdb -- go test ./fence/...
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/monolock/monolock/internal/testsupport/testdb"
)

func main() {
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: withdb [--] COMMAND [ARG...]\n\nRuns COMMAND with "+
			testdb.EnvPostgres+" and "+testdb.EnvMySQL+" naming a throwaway PostgreSQL and MariaDB.")
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	os.Exit(run(flag.Args()))
}

func run(args []string) int {
	type started struct {
		s   *testdb.Server
		err error
	}
	pg, my := make(chan started, 1), make(chan started, 1)
	go func() { s, err := testdb.StartPostgres(); pg <- started{s, err} }()
	go func() { s, err := testdb.StartMariaDB(); my <- started{s, err} }()
	p, m := <-pg, <-my
	for _, st := range []started{p, m} {
		if st.s != nil {
			defer st.s.Close()
		}
	}
	if err := errors.Join(p.err, m.err); err != nil {
		fmt.Fprintln(os.Stderr, "withdb:", err)
		return 1
	}

	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), testdb.EnvPostgres+"="+p.s.URL, testdb.EnvMySQL+"="+m.s.URL)
	// An interrupt or a termination goes on to the command (a terminal's
	// Ctrl-C reaches it directly too); withdb waits for it to end and then
	// removes the databases.
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(signals)
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "withdb:", err)
		return 1
	}
	go func() {
		for sig := range signals {
			_ = cmd.Process.Signal(sig)
		}
	}()
	if err := cmd.Wait(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			if exit.ExitCode() >= 0 {
				return exit.ExitCode()
			}
			return 1
		}
		fmt.Fprintln(os.Stderr, "withdb:", err)
		return 1
	}
	return 0
}
