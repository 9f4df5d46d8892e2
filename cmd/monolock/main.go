// Command monolock is the lock server. Run monolock -h for its settings.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"time"

	"github.com/rs/zerolog"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

// shutdownGrace bounds the stop sequence; another SIGTERM or SIGINT cuts
// it short.
const shutdownGrace = 10 * time.Second

// gcPercent is the garbage collector's target unless GOGC is set. The server
// allocates almost only when connections open, and a burst of them would
// otherwise leave up to its live heap again in garbage resident; memory per
// session is a promise of the product (about 1 KiB), and the collector's cost
// at this rate is negligible (a heartbeat allocates nothing).
const gcPercent = 25

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	// Signals are routed before anything starts so that none is lost, and
	// stay routed until the process exits (notifySignals).
	sig := notifySignals()
	os.Exit(run(os.Args[1:], os.Getenv, os.Stderr, sig))
}

// run starts the server with args and serves until sig or a failure ends
// it; it returns the exit status.
func run(args []string, getenv func(string) string, stderr io.Writer, sig signals) int {
	cfg, err := parseSettings(args, getenv, stderr)
	if errors.Is(err, errUsage) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "monolock: %v\n", err)
		return 2
	}
	log := newLogger(cfg, stderr)
	f, err := openFiles(cfg, log)
	if err != nil {
		fmt.Fprintf(stderr, "monolock: %v\n", err)
		return 2
	}
	d, err := start(cfg, log, f)
	if err != nil {
		fmt.Fprintf(stderr, "monolock: %v\n", err)
		return 1
	}
	return d.supervise(sig)
}

// newLogger writes diagnostics to stderr: human text or JSON lines, UTC
// RFC 3339 timestamps, colour only on a terminal.
func newLogger(cfg settings, stderr io.Writer) zerolog.Logger {
	zerolog.TimestampFunc = func() time.Time { return time.Now().UTC() }
	zerolog.TimeFieldFormat = time.RFC3339Nano
	var w io.Writer = stderr
	if cfg.logFormat == "text" {
		w = zerolog.ConsoleWriter{Out: stderr, NoColor: !isTerminal(stderr), TimeFormat: time.RFC3339}
	}
	return zerolog.New(w).Level(cfg.logLevel).With().Timestamp().Logger()
}
