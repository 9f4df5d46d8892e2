package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

// env is what a command may touch of the process, so tests can run commands
// in-process.
type env struct {
	stdin          *os.File // handed to child processes as is
	stdout, stderr io.Writer
	getenv         func(string) string
}

// command is one subcommand. Every command parses its own flags and must add
// the connection flags (addConnFlags).
type command struct {
	name    string
	summary string
	run     func(args []string, e *env) int
}

// commands lists the subcommands in the order the usage shows them.
var commands = []command{
	{name: "run", summary: "run a command while holding a lock", run: runMain},
	{name: "locks", summary: "list the held locks (admin API)", run: locksMain},
	{name: "lock", summary: "show one lock's holder and queue (admin API)", run: lockMain},
	{name: "release", summary: "force-release a lock from its holder (admin API)", run: releaseMain},
	{name: "kick", summary: "remove one waiter from a lock's queue (admin API)", run: kickMain},
	{name: "info", summary: "show the server's version, configuration and counts (admin API)", run: infoMain},
	{name: "whoami", summary: "show your identity and roles on the admin API", run: whoamiMain},
	{name: "audit-check", summary: "check the history in an audit log file", run: auditCheckMain},
}

const usage = `monolockctl is the command-line client of monolock, a lock service.

Usage:
  monolockctl COMMAND [FLAGS] [ARGS...]

Commands:
%s
Every command takes the connection flags -addr, -tls-ca, -tls-cert and -tls-key
(environment MONOLOCK_ADDRESS, MONOLOCK_TLS_CA, MONOLOCK_TLS_CERT,
MONOLOCK_TLS_KEY; a flag beats the environment, which beats the default).
The admin API commands also take -admin, the server's -admin-listen address
(environment MONOLOCK_ADMIN_ADDRESS, default 127.0.0.1:7071), -admin-tls-ca,
-admin-tls-cert and -admin-tls-key for an HTTPS admin port (environment
MONOLOCK_ADMIN_TLS_CA, MONOLOCK_ADMIN_TLS_CERT, MONOLOCK_ADMIN_TLS_KEY), and
-json. -addr takes several addresses, a primary and its standbys, separated
by commas or in repeated flags: each attempt starts from the one that last
worked and passes over one that refuses the connection.
Run 'monolockctl COMMAND -h' for a command's flags, exit statuses and examples.

Examples:
  monolockctl run nightly-import -- /usr/local/bin/import --full
  monolockctl run -no-wait -addr locks.internal:7070 deploy -- ./deploy.sh
  monolockctl locks -match 'nightly/*'
  monolockctl lock nightly/import
  monolockctl release nightly/import
  monolockctl audit-check /var/log/monolock/audit.jsonl
`

// execute runs the command line args (without the program name) and returns
// the exit status.
func execute(args []string, e *env) int {
	if len(args) == 0 {
		printUsage(e.stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		printUsage(e.stdout)
		return 0
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(args[1:], e)
		}
	}
	if args[0] == guardCommand { // internal to run, not listed
		return guardMain(args[1:], e)
	}
	return unknownCommand(args[0], e)
}

func printUsage(w io.Writer) {
	var list bytes.Buffer
	for _, c := range commands {
		fmt.Fprintf(&list, "  %-12s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, usage, list.String())
}

// parseFlags parses a command's flags. It reports ok=false with the exit
// status when the command should stop: 0 after -h (the help goes to stdout),
// exitUsage after a bad flag (the error and the help go to stderr).
func parseFlags(fs *flag.FlagSet, args []string, e *env) (status int, ok bool) {
	var out bytes.Buffer
	fs.SetOutput(&out)
	err := fs.Parse(args)
	switch {
	case err == nil:
		return 0, true
	case errors.Is(err, flag.ErrHelp):
		_, _ = e.stdout.Write(out.Bytes())
		return 0, false
	default:
		return badFlag(fs.Name(), err, e), false
	}
}

// setUsage makes -h print text, which gets the flag defaults as its argument.
func setUsage(fs *flag.FlagSet, text func(flags string) string) {
	fs.Usage = func() {
		out := fs.Output()
		var flags bytes.Buffer
		fs.SetOutput(&flags)
		fs.PrintDefaults()
		fs.SetOutput(out)
		_, _ = io.WriteString(out, text(flags.String()))
	}
}

// usageError reports a usage problem found after flag parsing.
func usageError(e *env, cmd, format string, args ...any) int {
	fmt.Fprintf(e.stderr, "monolockctl %s: %s\nRun 'monolockctl %s -h' for help.\n", cmd, fmt.Sprintf(format, args...), cmd)
	return exitUsage
}
