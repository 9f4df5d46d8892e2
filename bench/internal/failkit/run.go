package failkit

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Main runs a harness named name: configure reads its flags and checks
// what it needs (and says whether to keep the logs in any case); body does
// the rounds and returns how many ran and how many violations they found;
// cleanup(keep) stops what the harness started and removes it, keeping the
// logs when keep. The cleanup also runs on SIGINT and SIGTERM (then the
// exit status is 2) and after a panic. Exit status: 0 without violations,
// 1 with, 2 when the harness itself failed.
func Main(name string, stdout io.Writer, configure func() (keepLogs bool, err error), body func() (rounds, violations int, err error), cleanup func(keep bool)) int {
	keepLogs, err := configure()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		return 2
	}
	defer cleanup(true) // also on a panic; a no-op after the cleanup below
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		sig, ok := <-sigs
		if !ok {
			return
		}
		fmt.Fprintf(os.Stderr, "%s: %v: removing the namespaces and processes\n", name, sig)
		cleanup(true)
		os.Exit(2)
	}()
	started := time.Now()
	rounds, violations, err := body()
	cleanup(keepLogs || violations > 0 || err != nil)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		return 2
	}
	fmt.Fprintf(stdout, "%s: %d rounds in %v, %d violations\n", name, rounds, time.Since(started).Round(time.Second), violations)
	if violations > 0 {
		return 1
	}
	return 0
}

// Remove is the end of a harness's cleanup, after its servers are
// stopped: the client process stops, the namespaces go, and the files
// unless keep (then it says where they are).
func Remove(name string, clients *ClientRun, lan *LAN, dir string, keep bool) {
	_, _ = clients.Stop()
	if lan != nil {
		for _, err := range lan.Teardown() {
			fmt.Fprintf(os.Stderr, "%s: cleanup: %v\n", name, err)
		}
	}
	if dir == "" {
		return
	}
	if keep {
		fmt.Fprintf(os.Stderr, "%s: logs kept in %s\n", name, dir)
		return
	}
	_ = os.RemoveAll(dir)
}

// PrintTable writes the run's table after its round lines, and to the
// file results too when it is not empty.
func PrintTable(stdout io.Writer, table, results string) error {
	fmt.Fprintln(stdout)
	fmt.Fprint(stdout, table)
	if results == "" {
		return nil
	}
	return os.WriteFile(results, []byte(table), 0o644)
}

// StartSteady starts the client process (StartClients) and waits until
// every one of its n clients has been answered by a server, then a second
// more, so that holds, queues and writes are under way when the fault
// comes. On an error the process is stopped.
func StartSteady(self, ns string, n int, args ...string) (*ClientRun, error) {
	cr, err := StartClients(self, ns, args...)
	if err != nil {
		return nil, err
	}
	started := time.Now()
	if err := Await(30*time.Second, "every client answered by the server", func() bool {
		return cr.AnsweredSince(started) == n
	}); err != nil {
		_, _ = cr.Stop()
		return nil, err
	}
	time.Sleep(time.Second)
	return cr, nil
}

// Rounds runs rounds rounds of each fault, in order, printing each round's
// line and its violations as describe gives them, then the table of them
// all (PrintTable); it stops at the first round that fails (the harness
// could not run it). It returns how many rounds ran and how many
// violations they found.
func Rounds[F, R any](stdout io.Writer, faults []F, rounds int, name func(F) string, round func(F) (R, error),
	describe func(R) (line string, violations []string), table func([]R) string, results string) (ran, violations int, err error) {
	var rows []R
	for _, f := range faults {
		for i := range rounds {
			r, err := round(f)
			if err != nil {
				return len(rows), violations, fmt.Errorf("%s, round %d: %w", name(f), i+1, err)
			}
			rows = append(rows, r)
			line, vs := describe(r)
			violations += len(vs)
			fmt.Fprintf(stdout, "  %-62s round %d: %s\n", name(f), i+1, line)
			for _, v := range vs {
				fmt.Fprintln(stdout, "    VIOLATION:", v)
			}
		}
	}
	return len(rows), violations, PrintTable(stdout, table(rows), results)
}
