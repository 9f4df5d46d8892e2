package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/monolock/monolock/client"
)

// runHolding runs the command while lock is held and returns the exit status.
// It forwards signals to the command, stops it when the lock is lost, and
// releases the lock when it exits.
func (r *runArgs) runHolding(lock *client.Lock, sigs <-chan os.Signal, e *env) int {
	defer lock.Close()
	cmd := exec.Command(r.argv[0], r.argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = e.stdin, e.stdout, e.stderr
	cmd.Env = append(os.Environ(),
		"MONOLOCK_LOCK="+r.name,
		"MONOLOCK_TOKEN="+strconv.FormatUint(lock.Token(), 10))
	// Its own process group, so that a stop reaches the command's children.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(e.stderr, "monolockctl run: %v\n", err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return exitNotFound
		}
		return exitCannotExec
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the status is read from cmd.ProcessState
		close(exited)
	}()

	group := -cmd.Process.Pid
	lost := lock.Lost()
	var kill <-chan time.Time
	for {
		select {
		case <-exited:
			if err := lock.Close(); err != nil {
				r.report(e, "lock lost while the command ran: %v", err)
				return exitLost
			}
			return exitStatus(cmd.ProcessState)
		case sig := <-sigs:
			_ = syscall.Kill(group, sig.(syscall.Signal))
		case <-lost:
			lost = nil
			r.report(e, "lock lost (%v); stopping the command", lock.Err())
			_ = syscall.Kill(group, syscall.SIGTERM)
			kill = time.After(stopGrace)
		case <-kill:
			_ = syscall.Kill(group, syscall.SIGKILL)
		}
	}
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
