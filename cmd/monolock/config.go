package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/rs/zerolog"

	"github.com/monolock/monolock/eventloop"
)

// settings is the server's configuration as the operator gave it.
type settings struct {
	listen    string
	ioTimeout time.Duration
	logLevel  zerolog.Level
	logFormat string
}

// setting is one row of the configuration table: a flag, its environment
// variable, its default and its meaning. Flag beats environment beats default.
type setting struct {
	flag, env, def, usage string
	set                   func(*settings, string) error
}

var table = []setting{
	{"listen", "MONOLOCK_LISTEN_ADDRESS", eventloop.DefaultListenAddress, "protocol listen address (host:port)",
		func(s *settings, v string) error { s.listen = v; return nil }},
	{"io-timeout", "MONOLOCK_IO_TIMEOUT", eventloop.DefaultIOTimeout.String(), "bound on a missing ACQUIRE, a half-sent frame and undrained output (Go duration)",
		func(s *settings, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return fmt.Errorf("want a positive Go duration such as 5s, got %q", v)
			}
			s.ioTimeout = d
			return nil
		}},
	{"log-level", "MONOLOCK_LOG_LEVEL", "info", "diagnostics level: debug, info, warn, error",
		func(s *settings, v string) error {
			switch v {
			case "debug", "info", "warn", "error":
				s.logLevel, _ = zerolog.ParseLevel(v)
				return nil
			}
			return fmt.Errorf("want debug, info, warn or error, got %q", v)
		}},
	{"log-format", "MONOLOCK_LOG_FORMAT", "text", "diagnostics format on stderr: text or json",
		func(s *settings, v string) error {
			if v != "text" && v != "json" {
				return fmt.Errorf("want text or json, got %q", v)
			}
			s.logFormat = v
			return nil
		}},
}

// errUsage is returned after the help text was printed for -h.
var errUsage = errors.New("usage requested")

// parseSettings reads flags, then the environment, then defaults.
func parseSettings(args []string, getenv func(string) string, stderr io.Writer) (settings, error) {
	fs := flag.NewFlagSet("monolock", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	values := make([]*string, len(table))
	for i, st := range table {
		values[i] = fs.String(st.flag, "", st.usage)
	}
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stderr)
			return settings{}, errUsage
		}
		return settings{}, fmt.Errorf("%w (run monolock -h for the settings)", err)
	}
	if fs.NArg() > 0 {
		return settings{}, fmt.Errorf("unexpected argument %q: monolock takes only flags (run monolock -h)", fs.Arg(0))
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })

	var s settings
	for i, st := range table {
		v, from := st.def, "default"
		if e := getenv(st.env); e != "" {
			v, from = e, st.env
		}
		if given[st.flag] {
			v, from = *values[i], "-"+st.flag
		}
		if err := st.set(&s, v); err != nil {
			return settings{}, fmt.Errorf("invalid %s: %w", from, err)
		}
	}
	return s, nil
}

func printUsage(w io.Writer) {
	fmt.Fprintf(w, "monolock: a single-node lock server (wire protocol v1)\n\nUsage: monolock [flags]\n\nEvery flag has an environment variable; a flag beats the environment, which beats the default.\n\n")
	fmt.Fprintf(w, "  %-13s %-28s %-13s %s\n", "FLAG", "ENVIRONMENT", "DEFAULT", "MEANING")
	for _, st := range table {
		fmt.Fprintf(w, "  %-13s %-28s %-13s %s\n", "-"+st.flag, st.env, st.def, st.usage)
	}
	fmt.Fprintf(w, "\nThere is no lease or heartbeat setting (clients choose their lease) and no connection limit.\nSIGTERM or SIGINT shuts down gracefully: every session gets ERROR 0x01.\n")
}
