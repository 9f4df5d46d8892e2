package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/monolock/monolock/client"
	"github.com/monolock/monolock/protocol"
)

const runUsage = `Usage: monolockctl run [FLAGS] NAME -- COMMAND [ARGS...]

Waits for the lock NAME, runs COMMAND while holding it, and releases the lock
when COMMAND's whole process group has exited: flock(1) for a fleet.
COMMAND finds the lock's name in MONOLOCK_LOCK and the grant's fencing token
(decimal) in MONOLOCK_TOKEN; hand the token to whatever COMMAND writes to, so
that writes from a stale holder can be rejected. SIGINT, SIGTERM, SIGHUP and
SIGQUIT are forwarded to COMMAND's group; SIGPIPE does not stop monolockctl.

COMMAND runs in its own process group, so that stopping it reaches its children
too (it therefore cannot read from a terminal). The lock is held until every
process of that group has exited, also those COMMAND left running in the
background (-release-on-exit: only until COMMAND itself exits). If
monolockctl dies, even by SIGKILL, the group is killed, and the lock is
released once it is gone. While monolockctl is stopped (SIGSTOP, or Ctrl-Z)
it cannot heartbeat, so COMMAND's group is stopped too; when monolockctl
continues, so does the group, unless the lock was lost meanwhile: then the
group is killed.

If the lock is lost while COMMAND runs (no confirmation from the server within
0.8 × lease, connection lost, server error), the group gets SIGTERM at once,
before anything is printed, then SIGKILL after at most %v, and never later
than half-way between the loss and the moment the server could hand the lock
on (the newest answered heartbeat plus the lease). When the server
itself ended the lock (ERROR 0x02: a force release by an administrator;
ERROR 0x01: a shutdown), it has let go of it and the next holder may run
already: SIGKILL follows SIGTERM after min(0.1 × lease, %v).

A lock can be held only while the round trip to the server stays below
0.4 × lease; run warns once when one takes 0.3 × lease or more. Choose a
lease of at least 2.5 × the worst round trip.

Flags:
%s
Exit status:
  N      COMMAND's own status when it finished holding the lock, once its
         whole group has exited (128+N when COMMAND was killed by signal N,
         also by a forwarded one)
  2      usage or client error: bad flags or arguments, invalid NAME or lease
         (1ms at least), unusable TLS files, a server certificate that does not
         verify, a server error 0x10 or higher (such as 0x18, not authorized);
         the error is printed
  69     server unavailable: no connection (connect timeout %v), or the
         connection ended before the lock was granted (server shutting down,
         closed by an administrator, no confirmation, protocol violation)
  75     lock busy: -no-wait found it held, or -wait elapsed
  76     lock lost while COMMAND ran; COMMAND's group was stopped (also after
         a force release, a server shutdown or a lost connection)
  126    COMMAND could not be executed
  127    COMMAND was not found
  128+N  monolockctl received signal N while waiting for the lock (INT, TERM,
         HUP or QUIT; nothing was run)
When monolockctl itself is killed (SIGKILL), its caller sees 137 and
COMMAND's group is killed with it.
The statuses of monolockctl and of COMMAND share one range; a COMMAND that
exits with 75, say, looks busy.

Examples:
  # Run the nightly import on one host only; the others queue behind it.
  monolockctl run nightly-import -- /usr/local/bin/import --full

  # Skip this run when another host holds the lock (exit 75).
  monolockctl run -no-wait report -- ./make-report.sh

  # Wait at most 10 minutes; a longer lease for a slow link; mutual TLS.
  monolockctl run -wait 10m -lease 10s -addr locks.example.com:7070 \
      -tls-ca ca.pem -tls-cert host.pem -tls-key host-key.pem \
      deploy -- ./deploy.sh production
`

// stopGrace is the most COMMAND has between SIGTERM and SIGKILL after a loss
// (killDelay).
const stopGrace = 2 * time.Second

// releasedGrace is the most COMMAND has between SIGTERM and SIGKILL when the
// server has let go of the lock (a force release, a shutdown): the next
// holder may run already.
const releasedGrace = 250 * time.Millisecond

// runArgs is the parsed command line of 'run'.
type runArgs struct {
	conn   *connFlags
	lease  time.Duration
	wait   time.Duration // 0: wait as long as it takes
	noWait bool
	// releaseOnExit releases the lock when COMMAND's main process exits,
	// though processes it started may still run.
	releaseOnExit bool
	name          string
	argv          []string // COMMAND and its arguments
}

func runMain(args []string, e *env) int {
	r, status, ok := parseRun(args, e)
	if !ok {
		return status
	}
	dialed := &keptConn{}
	c, err := r.conn.client(dialed.wrap)
	if err != nil {
		fmt.Fprintf(e.stderr, "monolockctl run: %v\n", err)
		return exitUsage
	}

	// Signals are caught from the start: while waiting they abort the wait,
	// while COMMAND runs they are forwarded to its group. A hang-up (the
	// terminal or the ssh session went away) and SIGQUIT are forwarded too:
	// COMMAND's group is not the terminal's, so it would not get them.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, forwardedSignals()...)
	defer signal.Stop(sigs)
	// With SIGPIPE caught, a write to a closed stdout or stderr fails with
	// EPIPE instead of killing monolockctl before it has stopped COMMAND. A
	// caught signal, unlike an ignored one, is reset for COMMAND on exec.
	pipes := make(chan os.Signal, 1)
	signal.Notify(pipes, syscall.SIGPIPE)
	defer signal.Stop(pipes)

	lock, status, ok := r.waitForLock(c, sigs, e)
	if !ok {
		return status
	}
	return r.runHolding(lock, dialed.get(), sigs, e)
}

// forwardedSignals end the wait for the lock, and are forwarded to COMMAND's
// group while it runs.
func forwardedSignals() []os.Signal {
	return []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}
}

// keptConn remembers the connection the client dialed, so that the guard can
// hold a copy of it.
type keptConn struct {
	mu   sync.Mutex
	conn net.Conn
}

func (k *keptConn) wrap(d client.Dialer) client.Dialer { return keepDialer{d, k} }

func (k *keptConn) get() net.Conn {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.conn
}

type keepDialer struct {
	client.Dialer
	kept *keptConn
}

func (d keepDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := d.Dialer.DialContext(ctx, network, addr)
	if err == nil {
		d.kept.mu.Lock()
		d.kept.conn = conn
		d.kept.mu.Unlock()
	}
	return conn, err
}

func parseRun(args []string, e *env) (r *runArgs, status int, ok bool) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	r = &runArgs{conn: addConnFlags(fs, e.getenv)}
	r.lease = 2 * time.Second
	fs.Var(durationFlag{&r.lease}, "lease",
		"how long the server keeps the lock after the last heartbeat it got, a `duration` such as 2s; more for slow or unreliable links")
	fs.Var(durationFlag{&r.wait}, "wait", "give up (exit 75) when the lock is not granted within this `duration`; 0 waits as long as it takes")
	fs.BoolVar(&r.noWait, "no-wait", false, "exit 75 at once when the lock is held")
	fs.BoolVar(&r.releaseOnExit, "release-on-exit", false,
		"release the lock when COMMAND itself exits, even while processes it started in the background still run (by default the lock is held until COMMAND's whole process group is gone)")
	setUsage(fs, func(flags string) string {
		return fmt.Sprintf(runUsage, stopGrace, releasedGrace, flags, connectTimeout)
	})
	if status, ok := parseFlags(fs, args, e); !ok {
		return nil, status, false
	}
	rest := fs.Args()
	switch {
	case r.noWait && r.wait != 0:
		return nil, usageError(e, "run", "-wait and -no-wait exclude each other"), false
	case r.wait < 0:
		return nil, usageError(e, "run", "-wait must not be negative"), false
	case r.lease < time.Millisecond:
		return nil, usageError(e, "run", "-lease %v is shorter than the minimum lease of 1ms", r.lease), false
	case r.lease > protocol.MaxLease:
		return nil, usageError(e, "run", "-lease %v is longer than the maximum lease of %v", r.lease, protocol.MaxLease), false
	case len(rest) == 0:
		return nil, usageError(e, "run", "missing NAME"), false
	case len(rest) >= 2 && rest[1] != "--" && len(rest[1]) > 1 && strings.HasPrefix(rest[1], "-"):
		return nil, usageError(e, "run", "%q after NAME: flags go before NAME (monolockctl run [FLAGS] NAME -- COMMAND [ARGS...])", rest[1]), false
	case len(rest) < 2 || rest[1] != "--":
		return nil, usageError(e, "run", "expected -- after NAME, then COMMAND"), false
	case len(rest) == 2:
		return nil, usageError(e, "run", "missing COMMAND after --"), false
	}
	r.name, r.argv = rest[0], rest[2:]
	return r, 0, true
}

// durationFlag is a time.Duration flag whose error says what a duration
// looks like: "-lease 2" has no unit, and flag's own answer to it is
// "parse error".
type durationFlag struct{ d *time.Duration }

func (f durationFlag) String() string {
	if f.d == nil {
		return ""
	}
	return f.d.String()
}

func (f durationFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration with its unit, such as 2s, 500ms or 1m30s")
	}
	*f.d = d
	return nil
}

// maxReportedName is how much of the lock name a message quotes; an invalid
// name may be long.
const maxReportedName = 64

// report prints a message about the lock to stderr.
func (r *runArgs) report(e *env, format string, args ...any) {
	name := r.name
	if cut := protocol.CutUTF8(name, maxReportedName); cut != name {
		name = cut + "..."
	}
	fmt.Fprintf(e.stderr, "monolockctl run: lock %q: %s\n", name, fmt.Sprintf(format, args...))
}
