// Command monolock is the lock server. Run monolock -h for its settings.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

// shutdownGrace bounds a graceful shutdown; a second signal cuts it short.
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
	os.Exit(run(os.Args[1:], os.Getenv, os.Stderr))
}

func run(args []string, getenv func(string) string, stderr io.Writer) int {
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

	// Signals are wired before anything starts so that none is lost.
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(signals)

	d, err := start(cfg, log, f)
	if err != nil {
		fmt.Fprintf(stderr, "monolock: %v\n", err)
		return 1
	}
	for {
		select {
		case err := <-d.failed:
			log.Error().Err(err).Msg("server stopped unexpectedly")
			return 1
		case sig := <-signals:
			if sig == syscall.SIGHUP {
				d.reload()
				continue
			}
			log.Info().Stringer("signal", sig).Msg("shutting down: every session gets ERROR 0x01")
			return d.shutdown(signals)
		}
	}
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

// shutdownContext bounds a graceful shutdown by shutdownGrace and by a second
// signal.
func shutdownContext(signals <-chan os.Signal, log zerolog.Logger) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	go func() {
		for {
			select {
			case sig := <-signals:
				if sig == syscall.SIGHUP {
					continue // a reload request is no reason to hurry
				}
				log.Warn().Stringer("signal", sig).Msg("second signal: exiting now")
				cancel()
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return ctx, cancel
}
