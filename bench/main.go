// Command bench is monolock's benchmark harness: it starts monolock, a bare
// gnet server (the floor) and the installed peers (Redis, etcd, PostgreSQL)
// on loopback, drives each with the same workloads, checks that no lock ever
// has two holders, and prints one table per scenario. bench/RESULTS.md
// describes the scenarios and holds the latest full run.
//
// It is a Go module of its own (its peers' clients stay out of the server's
// go.mod); run it from this directory:
//
//	cd bench && go run . [-quick] [-json FILE] [-out DIR] [-only S1,S3] [-peers redis,etcd,postgres]
package main

import (
	"errors"
	"flag"
	"fmt"
	"github.com/monolock/monolock/bench/charts"
	"github.com/monolock/monolock/bench/floor"
	"github.com/monolock/monolock/bench/machine"
	"github.com/monolock/monolock/bench/peers"
	"github.com/monolock/monolock/bench/progress"
	"github.com/monolock/monolock/bench/releaseloop"
	"github.com/monolock/monolock/bench/report"
	"github.com/monolock/monolock/bench/scenario"
	"github.com/monolock/monolock/internal/testsupport/proc"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "floor-server" {
		os.Exit(floor.Main(os.Args[2:], os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == "release-loop" {
		os.Exit(releaseloop.Main(os.Args[2:], os.Stdout, os.Stderr))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command's flags.
type options struct {
	quick      bool
	jsonPath   string
	outDir     string
	only       string
	peers      string
	monolock   string
	redisRetry time.Duration
	noProgress bool
	waitQuiet  time.Duration
}

func parseOptions(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&o.quick, "quick", false, "small sizes: the whole run in well under a minute")
	fs.StringVar(&o.jsonPath, "json", "", "also write the results as JSON to this file")
	fs.StringVar(&o.outDir, "out", "out", "directory for PNG charts and server logs")
	fs.StringVar(&o.only, "only", "", "run only these scenarios, e.g. S1,S3 (default all)")
	fs.StringVar(&o.peers, "peers", strings.Join(peers.Names(), ","), "peers to start; empty for none")
	fs.StringVar(&o.monolock, "monolock", "../bin/monolock", "the monolock binary (built with go build when missing)")
	fs.DurationVar(&o.redisRetry, "redis-retry", time.Millisecond, "Redis waiters retry after a random pause in [d, 2d)")
	fs.BoolVar(&o.noProgress, "no-progress", false, "no progress bar on stderr")
	fs.DurationVar(&o.waitQuiet, "wait-quiet", 0, "before starting, wait up to this long for other load on the machine to drop under 15% of a core")
	fs.Usage = func() {
		_, _ = fmt.Fprintln(stderr, "usage: go run . [flags]   (in bench/)\n\nScenarios S0 floor, S1 cycle, S2 handover, S3 sessions, S4 expiry, S5 queue churn,\nS6 tls (a TLS session against a plain one), S7 bookkeeping (metrics and audit log on the grant and heartbeat paths),\nS8 fence, S9 release ports (lock cycles from one client network namespace: TIME_WAIT, connect failures; root).\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.redisRetry <= 0 {
		return o, errors.New("-redis-retry must be positive")
	}
	return o, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	opt, err := parseOptions(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "bench: %v\n", err)
		return 2
	}
	rep := &report.Report{Started: time.Now(), Command: "go run . " + strings.Join(args, " "), Quick: opt.quick, Machine: machine.Info(),
		Violations: []string{}, Errors: []string{}}
	soft, hard, maxSessions, err := machine.RaiseNoFile(machine.EphemeralPorts())
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}
	rep.Limits = report.Limits{NoFileSoft: soft, NoFileHard: hard, MaxSessions: maxSessions}
	if maxSessions < 1000 {
		_, _ = fmt.Fprintf(stderr, "bench: the descriptor limit (%d) leaves room for only %d sessions; raise it (ulimit -n)\n", soft, maxSessions)
		return 1
	}
	monoBin, err := ensureMonolock(opt.monolock, stderr)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}
	self, err := os.Executable()
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}
	logDir := ""
	if opt.outDir != "" {
		logDir = filepath.Join(opt.outDir, "logs")
		_ = os.RemoveAll(logDir)
	}
	tmp, err := os.MkdirTemp("", "monolock-bench-")
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}
	_ = os.Chmod(tmp, 0o755) // peers running as another user need to reach their directories
	defer func() { _ = os.RemoveAll(tmp) }()

	procs := &proc.Group{} // every child process of this run
	var peerList []string
	for p := range strings.SplitSeq(opt.peers, ",") {
		if p = strings.TrimSpace(p); p != "" {
			peerList = append(peerList, p)
		}
	}
	runs := scenario.NewRun(scenario.Config{
		Quick: opt.quick, Only: opt.only, Peers: peerList, RedisRetry: opt.redisRetry, WaitQuiet: opt.waitQuiet,
		Progress: !opt.noProgress && progress.IsTerminal(stderr), MaxSessions: maxSessions,
		Monolock: monoBin, Self: self, LogDir: logDir, Tmp: tmp, Procs: procs, Stderr: stderr,
	}, rep)

	// Stop every child on an interrupt.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-sig
		runs.Log(fmt.Sprintf("bench: %v: stopping servers", s))
		procs.StopAll()
		_ = os.RemoveAll(tmp)
		os.Exit(130)
	}()
	defer procs.StopAll()

	runs.Execute()
	rep.Finished = time.Now()
	rep.Machine.LoadAvgEnd = machine.LoadAvg()

	_, _ = fmt.Fprint(stdout, report.Render(rep))
	if opt.outDir != "" {
		files, err := charts.Write(rep, opt.outDir)
		if err != nil {
			_, _ = fmt.Fprintf(stderr, "bench: charts: %v\n", err)
			rep.Errors = append(rep.Errors, "charts: "+err.Error())
		} else if len(files) > 0 {
			_, _ = fmt.Fprintf(stdout, "charts: %s\n", strings.Join(files, ", "))
		}
	}
	if opt.jsonPath != "" {
		if err := rep.WriteJSON(opt.jsonPath); err != nil {
			_, _ = fmt.Fprintf(stderr, "bench: %v\n", err)
			return 1
		}
		_, _ = fmt.Fprintf(stdout, "json: %s\n", opt.jsonPath)
	}
	if rep.Failed() {
		_, _ = fmt.Fprintf(stderr, "bench: FAILED: %d violation(s), %d error(s)\n", len(rep.Violations), len(rep.Errors))
		return 1
	}
	return 0
}

// ensureMonolock returns the monolock binary, building it when missing.
func ensureMonolock(path string, stderr io.Writer) (string, error) {
	if _, err := os.Stat(path); err == nil {
		return filepath.Abs(path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	_, _ = fmt.Fprintf(stderr, "bench: %s is missing; building it\n", path)
	if err := proc.BuildTo(abs, "./cmd/monolock", stderr); err != nil {
		return "", fmt.Errorf("build %s (run from inside the repository, or make build): %w", path, err)
	}
	return abs, nil
}
