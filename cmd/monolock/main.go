// Command monolock is the lock server. Run monolock -h for its settings.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/monolock/monolock/eventloop"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

// shutdownGrace bounds a graceful shutdown; a second signal cuts it short.
const shutdownGrace = 10 * time.Second

func main() {
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

	srv, err := eventloop.New(eventloop.Config{ListenAddress: cfg.listen, IOTimeout: cfg.ioTimeout, Logger: log})
	if err != nil {
		log.Error().Err(err).Msg("cannot start")
		return 1
	}
	log.Info().Str("version", version).Str("listen", srv.Addr().String()).Dur("io_timeout", cfg.ioTimeout).Msg("monolock started")

	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()

	select {
	case err := <-served:
		log.Error().Err(err).Msg("server stopped unexpectedly")
		return 1
	case sig := <-signals:
		log.Info().Stringer("signal", sig).Msg("shutting down: every session gets ERROR 0x01")
	}
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	go func() {
		select {
		case sig := <-signals:
			log.Warn().Stringer("signal", sig).Msg("second signal: exiting now")
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := srv.Shutdown(ctx); err != nil {
		log.Error().Err(err).Msg("shutdown did not finish cleanly")
		return 1
	}
	log.Info().Msg("monolock stopped")
	return 0
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
