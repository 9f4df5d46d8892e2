package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/monolock/monolock/client"
)

// The harness runs its holders as processes of this same binary, so that
// they can be stopped, killed and signalled like real ones.

// writeInterval is the time between two writes of a holder.
const writeInterval = 5 * time.Millisecond

// writer is a connection to the resource.
type writer struct {
	conn   net.Conn
	r      *bufio.Reader
	lock   string
	holder string
}

func dialResource(addr, lock, holder string) (*writer, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &writer{conn: c, r: bufio.NewReader(c), lock: lock, holder: holder}, nil
}

// write sends one write and waits for its answer.
func (w *writer) write(token uint64) error {
	if _, err := fmt.Fprintf(w.conn, "%s %s %d\n", w.lock, w.holder, token); err != nil {
		return err
	}
	_, err := w.r.ReadString('\n')
	return err
}

// writeMain is the role "write": COMMAND under monolockctl run. It writes
// with MONOLOCK_TOKEN every writeInterval, for -for (0: until killed).
func writeMain(args []string) int {
	fs := flag.NewFlagSet("write", flag.ExitOnError)
	res := fs.String("resource", "", "resource address")
	holder := fs.String("holder", "", "holder name")
	dur := fs.Duration("for", 0, "stop after this long (0: never)")
	ignoreTerm := fs.Bool("ignore-term", false, "ignore SIGTERM")
	_ = fs.Parse(args)
	if *ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
	}
	token, err := strconv.ParseUint(os.Getenv("MONOLOCK_TOKEN"), 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "write: MONOLOCK_TOKEN:", err)
		return 2
	}
	w, err := dialResource(*res, os.Getenv("MONOLOCK_LOCK"), *holder)
	if err != nil {
		fmt.Fprintln(os.Stderr, "write:", err)
		return 2
	}
	var end <-chan time.Time
	if *dur > 0 {
		end = time.After(*dur)
	}
	tick := time.NewTicker(writeInterval)
	defer tick.Stop()
	for {
		if err := w.write(token); err != nil {
			return 1
		}
		select {
		case <-tick.C:
		case <-end:
			return 0
		}
	}
}

// holdMain is the role "hold": a Go program that holds the lock with
// client.Do and checks Lock.Valid before each write, for -for (0: until the
// lock is lost).
func holdMain(args []string) int {
	fs := flag.NewFlagSet("hold", flag.ExitOnError)
	addr := fs.String("addr", "", "server (or proxy) address")
	name := fs.String("name", "", "lock name")
	lease := fs.Duration("lease", 500*time.Millisecond, "lease")
	res := fs.String("resource", "", "resource address")
	holder := fs.String("holder", "", "holder name")
	dur := fs.Duration("for", 0, "release after this long (0: hold until lost)")
	_ = fs.Parse(args)
	w, err := dialResource(*res, *name, *holder)
	if err != nil {
		fmt.Fprintln(os.Stderr, "hold:", err)
		return 2
	}
	c := client.New(client.Config{Address: *addr})
	err = c.Do(context.Background(), *name, *lease, func(ctx context.Context, token uint64) error {
		lock := client.LockFromContext(ctx)
		var end <-chan time.Time
		if *dur > 0 {
			end = time.After(*dur)
		}
		tick := time.NewTicker(writeInterval)
		defer tick.Stop()
		for {
			if !lock.Valid() {
				return nil
			}
			if err := w.write(token); err != nil {
				return err
			}
			select {
			case <-tick.C:
			case <-end:
				return nil
			case <-ctx.Done():
				return nil
			}
		}
	})
	switch {
	case err == nil:
		return 0
	case errors.Is(err, client.ErrHeartbeatTimeout), errors.Is(err, client.ErrConnectionClosed):
		return 76
	}
	fmt.Fprintln(os.Stderr, "hold:", err)
	return 1
}
