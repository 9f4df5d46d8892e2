package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

// 'run' does not start COMMAND itself. It starts a copy of monolockctl, the
// guard (this hidden command), which starts COMMAND in a process group of its
// own and stays beside it:
//
//   - if monolockctl dies in any way, SIGKILL included, the guard kills
//     COMMAND's whole group: it watches a pipe whose only writer is
//     monolockctl (end of file: the kernel closed it with the process), and a
//     parent-death signal whose arrival it confirms by its parent's process
//     ID, so that neither a lost signal nor a stray one decides alone;
//   - it holds a copy of the lock's connection, so that when monolockctl
//     dies the server does not see a close, and hand the lock on, before the
//     group is dead: the lock is released when the guard exits (or expires
//     with its lease, no heartbeat being sent any more);
//   - while monolockctl is stopped (SIGSTOP, or SIGTSTP from the terminal)
//     and cannot heartbeat, it stops COMMAND's group too; monolockctl, on its
//     SIGCONT, continues the group if the lock is still valid and kills it
//     otherwise;
//   - it exits only when COMMAND's whole process group is gone (unless
//     -release-on-exit), with COMMAND's status, so monolockctl, which waits
//     for the guard, holds the lock as long as any process of the group
//     runs, as flock(1) holds it while a child keeps the descriptor.
//
// The guard is not in COMMAND's group, so signals for the group do not reach
// it; it ignores the usual termination signals (monolockctl forwards them to
// the group itself) and dies only by SIGKILL, which the parent-death signal of
// COMMAND turns into COMMAND's SIGKILL.

// guardCommand is the hidden command that runs the guard.
const guardCommand = "__run-guard"

// The guard's inherited descriptors, in exec.Cmd.ExtraFiles order.
const (
	guardWatchFD  = 3 // read end of the pipe monolockctl holds open
	guardReportFD = 4 // write end: the guard reports COMMAND's process ID
	guardConnFD   = 5 // a copy of the lock's connection, only held
)

// groupPoll is how often the guard looks whether COMMAND's group is gone.
const groupPoll = 20 * time.Millisecond

// guardMain is the guard: __run-guard PARENT_PID HOLD_GROUP -- COMMAND [ARGS...]
func guardMain(args []string, e *env) int {
	if len(args) < 4 || args[2] != "--" {
		fmt.Fprintf(e.stderr, "monolockctl: %s is internal to 'monolockctl run'\n", guardCommand)
		return exitUsage
	}
	parent, err := strconv.Atoi(args[0])
	if err != nil {
		return exitUsage
	}
	holdGroup := args[1] == "hold-group"
	argv := args[3:]

	// Termination signals are for COMMAND's group, which monolockctl signals
	// itself; SIGPIPE must not kill the guard; SIGUSR1 is the parent-death
	// signal.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGPIPE, syscall.SIGUSR1)

	// Inherited descriptors are not close-on-exec; COMMAND must get none of
	// them (the connection copy would keep the lock for -release-on-exit).
	for fd := guardWatchFD; fd <= guardConnFD; fd++ {
		syscall.CloseOnExec(fd)
	}

	parentGone := make(chan struct{})
	watch := os.NewFile(guardWatchFD, "monolockctl watch pipe")
	go func() {
		_, _ = io.Copy(io.Discard, watch) // returns at end of file: monolockctl is gone
		close(parentGone)
	}()
	report := os.NewFile(guardReportFD, "monolockctl report pipe")
	if os.Getppid() != parent {
		// monolockctl died before the guard could start watching.
		return exitSignalBase + int(syscall.SIGKILL)
	}

	// Orphans of COMMAND's group become the guard's children, so it reaps
	// them at once: a zombie would keep the group alive until the system's
	// init got round to it (seconds, on some).
	if err := becomeSubreaper(); err != nil {
		fmt.Fprintf(e.stderr, "monolockctl run: cannot become the reaper of COMMAND's processes: %v\n", err)
	}

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// A parent-death signal is tied to the thread that forks: this goroutine
	// keeps its thread for the guard's life, so that only the guard's death
	// sends it.
	runtime.LockOSThread()
	cmd.SysProcAttr = commandAttr()
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(e.stderr, "monolockctl run: %v\n", err)
		_ = report.Close()
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return exitNotFound
		}
		return exitCannotExec
	}
	group := cmd.Process.Pid
	fmt.Fprintf(report, "%d\n", group)
	_ = report.Close()

	mainExited := make(chan syscall.WaitStatus, 1)
	go reap(group, mainExited)

	ticker := time.NewTicker(groupPoll)
	defer ticker.Stop()
	orphaned := false // monolockctl is gone
	paused := false   // COMMAND's group was stopped because monolockctl was
	status := -1      // COMMAND's, once its main process has exited
	for {
		select {
		case sig := <-sigs:
			if sig != syscall.SIGUSR1 || os.Getppid() == parent {
				continue // only a parent-death signal that is confirmed counts
			}
			orphaned = true
			killGroup(group)
		case <-parentGone:
			parentGone = nil
			orphaned = true
			killGroup(group)
		case ws := <-mainExited:
			mainExited = nil
			status = waitStatus(ws)
			if !holdGroup && !orphaned {
				return status
			}
		case <-ticker.C:
			switch {
			case orphaned:
				killGroup(group) // also whatever was forked while the last kill ran
			case !paused && parentStopped(parent):
				// monolockctl is stopped and cannot heartbeat: COMMAND must
				// not run on meanwhile. monolockctl continues the group on
				// SIGCONT, or kills it if the lock was lost.
				_ = syscall.Kill(-group, syscall.SIGSTOP)
				if parentStopped(parent) {
					paused = true
				} else {
					// monolockctl went on before the stop reached the group:
					// its own SIGCONT may have come first.
					_ = syscall.Kill(-group, syscall.SIGCONT)
				}
			case paused && !parentStopped(parent):
				paused = false
			}
		}
		if status >= 0 && groupGone(group) {
			return status
		}
	}
}

// parentStopped reports whether process pid is stopped (SIGSTOP, SIGTSTP),
// from /proc/PID/stat.
func parentStopped(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses and may
	// hold anything, so look after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	// 'T' only: a job-control stop, which ends with SIGCONT. A tracer's stop
	// ('t') sends monolockctl no SIGCONT to continue the group with.
	return b[i+2] == 'T'
}

// reap waits for every child of the guard, COMMAND and the orphans of its
// processes, and reports COMMAND's own status. It ends when no child is left.
func reap(main int, mainExited chan<- syscall.WaitStatus) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case err != nil:
			return // ECHILD: nothing left to reap
		case pid == main && (ws.Exited() || ws.Signaled()):
			mainExited <- ws
		}
	}
}

// waitStatus is a status as a shell reports it.
func waitStatus(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return exitSignalBase + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// killGroup kills COMMAND's whole group at once: monolockctl is gone, no one
// heartbeats the lock any more, and the server will hand it on.
func killGroup(group int) { _ = syscall.Kill(-group, syscall.SIGKILL) }

// groupGone reports whether no process is left in the group. A process the
// guard may not signal (EPERM) is still a member.
func groupGone(group int) bool {
	return errors.Is(syscall.Kill(-group, 0), syscall.ESRCH)
}
