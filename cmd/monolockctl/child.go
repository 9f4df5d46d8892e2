package main

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/monolock/monolock/client"
	"github.com/monolock/monolock/protocol"
)

// rttWarnFraction is how near the slow-link limit (RTT < 0.4 × lease) the
// longest measured round trip may come before 'run' warns: at 0.3 × lease.
const (
	rttWarnNum = 3
	rttWarnDen = 10
)

// runHolding runs the command while lock is held and returns the exit status.
// It forwards signals to the command's group, stops the group when the lock
// is lost, and releases the lock when the group is gone. conn is the lock's
// connection, for the guard to hold (nil: not available).
func (r *runArgs) runHolding(lock *client.Lock, conn net.Conn, sigs <-chan os.Signal, e *env) int {
	defer lock.Close()
	// After a stop (SIGSTOP, or SIGTSTP from the terminal) monolockctl gets
	// SIGCONT; the guard has stopped COMMAND's group meanwhile (guard.go),
	// and it is for monolockctl to let it go on, once it knows whether the
	// lock is still held. The guard may stop the group as soon as it has
	// started COMMAND, so SIGCONT is caught before: one that came before the
	// loop would otherwise leave the group stopped for good.
	conts := make(chan os.Signal, 1)
	signal.Notify(conts, syscall.SIGCONT)
	defer signal.Stop(conts)

	guard, group, watch, status, ok := r.startGuard(lock, conn, e)
	if !ok {
		return status
	}
	// The guard's watch pipe stays open until monolockctl is done.
	defer watch.Close()
	exited := make(chan struct{})
	go func() {
		_ = guard.Wait() // the status is read from guard.ProcessState
		close(exited)
	}()

	// warnSlowLink warns, once, when the longest round trip so far is
	// 0.3 × lease or more. It runs every lease/4 while COMMAND runs, and
	// once more at a loss and at the end, so that a run the slow link cut
	// short, or that ended before a tick, still says so.
	warned := false
	warnSlowLink := func() {
		if rtt := lock.MaxRTT(); !warned && rtt*rttWarnDen >= r.lease*rttWarnNum {
			warned = true
			r.report(e, "warning: a round trip to the server took %v; with -lease %v the lock is lost when one takes 0.4 × lease (%v): use a lease of at least 2.5 × the worst round trip",
				rtt.Round(time.Millisecond), r.lease, r.lease*4/10)
		}
	}

	lost := lock.Lost()
	var kill <-chan time.Time
	stopping := false
	// stop ends the group after a loss: SIGTERM at once, before anything is
	// printed, SIGKILL after killDelay.
	stop := func() {
		if stopping {
			return
		}
		stopping = true
		_ = syscall.Kill(-group, syscall.SIGTERM)
		cause := lock.Err()
		if cause == nil { // Valid saw the deadline pass before the session did
			cause = client.ErrHeartbeatTimeout
		}
		grace := killDelay(cause, r.lease, lock.ValidUntil(), time.Now())
		if grace <= 0 {
			_ = syscall.Kill(-group, syscall.SIGKILL)
		} else {
			kill = time.After(grace)
		}
		warnSlowLink()
		next := ""
		if serverLetGo(cause) {
			next = "; the server has let go of it, so the next holder may run already"
		}
		r.report(e, "lock lost (%v)%s; stopping the command (SIGKILL in %v)", cause, next, max(grace, 0).Round(time.Millisecond))
	}
	rttCheck := time.NewTicker(max(r.lease/4, time.Millisecond))
	defer rttCheck.Stop()
	for {
		select {
		case <-exited:
			warnSlowLink()
			if err := lock.Close(); err != nil {
				if !stopping { // else stop has said so, with the cause
					r.report(e, "lock lost while the command ran: %v", err)
				}
				return exitLost
			}
			return exitStatus(guard.ProcessState)
		case sig := <-sigs:
			_ = syscall.Kill(-group, sig.(syscall.Signal))
		case <-conts:
			// A paused monolockctl may have lost the lock without its
			// goroutines having noticed yet: Valid reads the clock.
			if !lock.Valid() {
				stop()
			}
			_ = syscall.Kill(-group, syscall.SIGCONT)
		case <-lost:
			lost = nil
			stop()
		case <-kill:
			kill = nil
			_ = syscall.Kill(-group, syscall.SIGKILL)
		case <-rttCheck.C:
			warnSlowLink()
		}
	}
}

// killDelay is how long the group has between SIGTERM and SIGKILL after a
// loss with cause, at now, for a lock of lease whose give-up deadline is
// validUntil.
//
// When the server itself ended the lock (serverLetGo: a force release or a
// kick, a shutdown) it has let go already and the next holder may run: the
// group gets min(0.1 × lease, releasedGrace), time to act on SIGTERM and no
// more. Otherwise the server still holds the lock for this session until
// its expiry, the newest answered send plus the lease, 0.2 × lease after the
// give-up deadline: SIGKILL goes at half that margin, leaving the other half
// for the processes to die and for timers that fire late, and never later
// than stopGrace after the loss.
func killDelay(cause error, lease time.Duration, validUntil, now time.Time) time.Duration {
	if serverLetGo(cause) {
		return min(releasedGrace, lease/10)
	}
	return min(stopGrace, validUntil.Add(lease/10).Sub(now))
}

// serverLetGo reports whether a lock ended because the server sent ERROR
// 0x01 (shutting down: every lock is free once it has) or 0x02 (closed by an
// administrator: handed to the next waiter at once).
func serverLetGo(cause error) bool {
	return errors.Is(cause, protocol.ErrShuttingDown) || errors.Is(cause, protocol.ErrClosedByAdmin)
}

// startGuard starts the guard (see guard.go), which starts COMMAND, and
// returns the guard's process and COMMAND's process group.
//
// The returned watch pipe must stay open, unused, while monolockctl runs: its
// close by the kernel is how the guard learns that monolockctl is gone.
func (r *runArgs) startGuard(lock *client.Lock, conn net.Conn, e *env) (guard *exec.Cmd, group int, watch *os.File, status int, ok bool) {
	watchR, watchW, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(e.stderr, "monolockctl run: %v\n", err)
		return nil, 0, nil, exitCannotExec, false
	}
	reportR, reportW, err := os.Pipe()
	if err != nil {
		_, _ = watchR.Close(), watchW.Close()
		fmt.Fprintf(e.stderr, "monolockctl run: %v\n", err)
		return nil, 0, nil, exitCannotExec, false
	}
	defer reportR.Close()
	files := []*os.File{watchR, reportW}
	if f := connCopy(conn); f != nil {
		files = append(files, f)
	}

	hold := "hold-group"
	if r.releaseOnExit {
		hold = "release-on-exit"
	}
	args := append([]string{guardCommand, strconv.Itoa(os.Getpid()), hold, "--"}, r.argv...)
	guard = exec.Command(selfPath(), args...)
	guard.Args[0] = os.Args[0]
	guard.Stdin, guard.Stdout, guard.Stderr = e.stdin, e.stdout, e.stderr
	guard.Env = append(os.Environ(),
		"MONOLOCK_LOCK="+r.name,
		"MONOLOCK_TOKEN="+strconv.FormatUint(lock.Token(), 10))
	guard.ExtraFiles = files
	// A group of its own keeps the terminal's signals away from the guard;
	// SIGUSR1 on monolockctl's death is confirmed by the guard (see guard.go).
	// The parent-death signal follows the forking thread, so this goroutine
	// keeps its thread from here on.
	runtime.LockOSThread()
	guard.SysProcAttr = guardAttr()
	err = guard.Start()
	for _, f := range files {
		_ = f.Close()
	}
	if err != nil {
		_ = watchW.Close()
		fmt.Fprintf(e.stderr, "monolockctl run: starting the command: %v\n", err)
		return nil, 0, nil, exitCannotExec, false
	}
	line, _ := bufio.NewReader(reportR).ReadString('\n')
	group, err = strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		// COMMAND did not start; the guard said why and exits 126 or 127.
		_ = guard.Wait()
		_ = watchW.Close()
		return nil, 0, nil, exitStatus(guard.ProcessState), false
	}
	return guard, group, watchW, 0, true
}

// selfPath is this very binary: /proc/self/exe, which works even when the
// file was replaced since monolockctl started, where there is one.
func selfPath() string {
	const self = "/proc/self/exe"
	if _, err := os.Stat(self); err == nil {
		return self
	}
	if p, err := os.Executable(); err == nil {
		return p
	}
	return os.Args[0]
}

// connCopy duplicates the lock connection's descriptor for the guard, or
// returns nil when it cannot. The copy is made by hand, not with
// (*net.TCPConn).File, whose descriptor would switch the shared socket to
// blocking mode when handed to a child.
func connCopy(conn net.Conn) *os.File {
	if conn == nil {
		return nil
	}
	if u, ok := conn.(interface{ NetConn() net.Conn }); ok { // *tls.Conn
		conn = u.NetConn()
	}
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	dup := -1
	if err := raw.Control(func(fd uintptr) {
		if nfd, err := syscall.Dup(int(fd)); err == nil {
			syscall.CloseOnExec(nfd)
			dup = nfd
		}
	}); err != nil || dup < 0 {
		return nil
	}
	return os.NewFile(uintptr(dup), "lock connection")
}

// exitStatus is the command's exit status as a shell reports it.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitSignalBase + int(ws.Signal())
	}
	return ps.ExitCode()
}

func signalNumber(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return int(s)
	}
	return 0
}
