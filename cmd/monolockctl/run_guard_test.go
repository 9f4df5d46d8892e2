package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monolock/monolock/client"
	"github.com/monolock/monolock/internal/testsupport/faultproxy"
)

// Tests of what keeps COMMAND from outliving the lock: the process group is
// held, signals are forwarded, SIGPIPE cannot kill monolockctl, and the death
// of monolockctl kills COMMAND's group.

// readPID waits for a file that COMMAND writes its shell's process ID into;
// COMMAND leads its process group, so that is the group's ID.
func readPID(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		if b, err := os.ReadFile(path); err == nil && strings.HasSuffix(string(b), "\n") {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatalf("%s: %q", path, b)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no process ID in %s within %v", path, patience)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// groupAlive reports whether any process of the group is left.
func groupAlive(pgid int) bool {
	return !errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
}

// killGroupAtEnd makes sure no process of the group outlives the test.
func killGroupAtEnd(t *testing.T, pgid int) {
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
}

// TestRunHoldsLockUntilGroupIsGone: COMMAND exits at once but leaves a
// background child; the next holder runs only after that child has finished,
// and the status is COMMAND's own.
func TestRunHoldsLockUntilGroupIsGone(t *testing.T) {
	addr := startServer(t).Addr().String()
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	env := []string{"LOG=" + log}
	first := startCtl(t, addr, env, "run", "group", "--", "sh", "-c",
		`(sleep 0.3; echo background >> "$LOG") & echo ready; exit 3`)
	first.waitLine(t, "ready")
	second := startCtl(t, addr, env, "run", "group", "--", "sh", "-c", `echo second >> "$LOG"`)
	if status, _, stderr := first.wait(t); status != 3 {
		t.Fatalf("first: status %d, stderr %q; want COMMAND's 3", status, stderr)
	}
	if status, _, stderr := second.wait(t); status != 0 {
		t.Fatalf("second: status %d, stderr %q", status, stderr)
	}
	if b, _ := os.ReadFile(log); string(b) != "background\nsecond\n" {
		t.Fatalf("log %q: the lock was handed on while the background child ran", b)
	}
}

// TestRunReleaseOnExit: the old behaviour on request: the lock goes when
// COMMAND's main process exits, background children or not.
func TestRunReleaseOnExit(t *testing.T) {
	addr := startServer(t).Addr().String()
	pidFile := filepath.Join(t.TempDir(), "pid")
	status, _, stderr := runCtl(t, addr, []string{"PIDFILE=" + pidFile}, "run", "-release-on-exit", "old", "--", "sh", "-c",
		`sleep 60 >/dev/null 2>&1 & echo $! > "$PIDFILE"; exit 4`)
	bg := readPID(t, pidFile)
	defer syscall.Kill(bg, syscall.SIGKILL)
	if status != 4 {
		t.Fatalf("status %d, stderr %q; want 4", status, stderr)
	}
	if err := syscall.Kill(bg, 0); err != nil {
		t.Fatalf("the background child is gone (%v): the run waited for it", err)
	}
	l, err := client.New(client.Config{Address: addr}).TryAcquire(t.Context(), "old", time.Second)
	if err != nil {
		t.Fatalf("the lock is not free after the run: %v", err)
	}
	_ = l.Close()
}

// TestRunForwardsEachSignal: INT, TERM, HUP and QUIT reach COMMAND's group.
func TestRunForwardsEachSignal(t *testing.T) {
	addr := startServer(t).Addr().String()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT} {
		name := strings.TrimPrefix(sigName(sig), "SIG")
		t.Run(name, func(t *testing.T) {
			c := startCtl(t, addr, nil, "run", "signals", "--", "sh", "-c",
				`trap "echo got `+name+`; exit 7" `+name+`; echo ready; while :; do sleep 0.05; done`)
			c.waitLine(t, "ready")
			if err := c.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if status, stdout, stderr := c.wait(t); status != 7 || !strings.Contains(stdout, "got "+name) {
				t.Fatalf("status %d, stdout %q, stderr %q; want 7 from the command's trap", status, stdout, stderr)
			}
		})
	}
}

func sigName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	}
	return "SIGQUIT"
}

// TestRunSurvivesClosedStderr: with stderr a pipe nobody reads any more, the
// "lock lost" message cannot kill monolockctl (SIGPIPE) before it has stopped
// COMMAND; it still stops it and exits 76.
func TestRunSurvivesClosedStderr(t *testing.T) {
	srv := startServer(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	_ = r.Close()
	defer w.Close()
	dir := t.TempDir()
	pidFile, out := filepath.Join(dir, "pid"), filepath.Join(dir, "out")
	cmd := exec.Command(ctlPath, "run", "-addr", srv.Addr().String(), "pipe", "--", "sh", "-c",
		// COMMAND's own stderr goes elsewhere: a write of its own to the
		// closed pipe would be its own SIGPIPE, not what is tested here.
		`exec 2>/dev/null; trap "echo got TERM >> \"$OUT\"; exit 0" TERM; echo $$ > "$PIDFILE"; while :; do sleep 0.05; done`)
	cmd.Env = append(cleanEnv(), "PIDFILE="+pidFile, "OUT="+out)
	cmd.Stderr = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	pgid := readPID(t, pidFile)
	killGroupAtEnd(t, pgid)
	if err := srv.Stop(); err != nil { // every session gets ERROR 0x01: lost
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(patience):
		t.Fatal("monolockctl did not exit")
	}
	if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); ws.Signaled() || ws.ExitStatus() != exitLost {
		t.Fatalf("monolockctl ended with %v; want exit %d", cmd.ProcessState, exitLost)
	}
	if b, _ := os.ReadFile(out); string(b) != "got TERM\n" || groupAlive(pgid) {
		t.Fatalf("COMMAND's output %q, group alive %v; want it stopped by SIGTERM", b, groupAlive(pgid))
	}
}

// TestRunDeathKillsGroup: when monolockctl is killed (SIGKILL: nothing of it
// runs), COMMAND and its background children die, and the lock is handed on
// only once they are gone.
func TestRunDeathKillsGroup(t *testing.T) {
	addr := startServer(t).Addr().String()
	pidFile := filepath.Join(t.TempDir(), "pid")
	c := startCtl(t, addr, []string{"PIDFILE=" + pidFile}, "run", "-lease", "2s", "death", "--", "sh", "-c",
		`trap "" TERM HUP; (trap "" TERM HUP; while :; do sleep 0.01; done) & echo $$ > "$PIDFILE"; wait`)
	pgid := readPID(t, pidFile)
	killGroupAtEnd(t, pgid)
	// The next holder queues first, so its grant is the hand-over itself.
	next, err := client.New(client.Config{Address: addr}).Enqueue(t.Context(), "death", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	if err := c.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-next.Granted():
	case <-time.After(patience):
		t.Fatal("the lock was not handed on")
	}
	if groupAlive(pgid) {
		t.Fatal("COMMAND's group still runs after the lock was handed on")
	}
}

// TestRunLostWithinTheLease: with the link frozen both ways, COMMAND (which
// ignores SIGTERM) is killed before the server hands the lock on by expiry.
func TestRunLostWithinTheLease(t *testing.T) {
	addr := startServer(t).Addr().String()
	proxy, err := faultproxy.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	// A 2 s lease: SIGKILL goes 0.1 × lease = 200 ms before the server's
	// expiry, room for a loaded machine.
	c, pgid, next := runIgnoringTERM(t, proxy.Addr(), addr, "frozen", "-lease", "2s")
	proxy.Freeze(faultproxy.Both)
	select {
	case <-next.Granted():
	case <-time.After(patience):
		t.Fatal("the lock was not handed on")
	}
	if groupAlive(pgid) {
		t.Fatal("COMMAND still runs after the server handed the lock on")
	}
	if status, _, stderr := c.wait(t); status != exitLost || !strings.Contains(stderr, "lock lost") {
		t.Fatalf("status %d, stderr %q; want %d", status, stderr, exitLost)
	}
}

// TestRunWarnsOfSlowLink: a round trip of 0.3 × lease or more draws one
// warning on stderr; a fast one none.
//
// Neither half depends on how busy the machine is. The slow link's delay is
// a floor that load only raises: every round trip, the ACQUIRE's first, is
// 320 ms or more against a threshold of 300 ms, and the warning is checked
// at the command's exit and at a loss, so it comes once whether the run
// ends normally or a loaded machine loses the lock (its status is not the
// point here). The fast link has a 60 s lease: its threshold of 18 s is
// beyond any loopback round trip, and a loss (24 s) beyond any pause (with
// a 1 s lease the margins were 300 and 400 ms, which a loaded machine
// crossed).
func TestRunWarnsOfSlowLink(t *testing.T) {
	addr := startServer(t).Addr().String()
	proxy, err := faultproxy.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	proxy.SetDelay(160 * time.Millisecond) // each way: a round trip of 320 ms at least
	const warning = "warning: a round trip to the server took"
	_, _, stderr := runCtl(t, proxy.Addr(), nil, "run", "-lease", "1s", "slow", "--", "sleep", "0.7")
	if n := strings.Count(stderr, warning); n != 1 {
		t.Fatalf("%d warnings in stderr %q; want 1", n, stderr)
	}
	if status, _, stderr := runCtl(t, addr, nil, "run", "-lease", "60s", "fast", "--", "true"); status != 0 || strings.Contains(stderr, warning) {
		t.Fatalf("fast link: status %d, stderr %q; want 0 and no warning", status, stderr)
	}
}

// procState is the state letter of /proc/PID/stat ("" when gone).
func procState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return ""
	}
	return s[i+2 : i+3]
}

// awaitState waits until process pid is in state want ("" for gone).
func awaitState(t *testing.T, pid int, want, what string) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for procState(pid) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s: state %q, want %q within %v", what, procState(pid), want, patience)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRunStopPausesCommand: while monolockctl is stopped (it cannot
// heartbeat), COMMAND is stopped too; on SIGCONT with the lock still held it
// goes on; if the lock was handed on meanwhile, it is killed, never continued.
func TestRunStopPausesCommand(t *testing.T) {
	addr := startServer(t).Addr().String()
	t.Run("short stop", func(t *testing.T) {
		pidFile := filepath.Join(t.TempDir(), "pid")
		c := startCtl(t, addr, []string{"PIDFILE=" + pidFile}, "run", "-lease", "10s", "stop-short", "--", "sh", "-c",
			`trap "exit 5" TERM; echo $$ > "$PIDFILE"; while :; do sleep 0.01; done`)
		pgid := readPID(t, pidFile)
		killGroupAtEnd(t, pgid)
		if err := c.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		awaitState(t, pgid, "T", "COMMAND while monolockctl is stopped")
		if err := c.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		awaitState(t, pgid, "S", "COMMAND after monolockctl went on") // sleeping in its loop again
		if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if status, _, stderr := c.wait(t); status != 5 {
			t.Fatalf("status %d, stderr %q; want COMMAND's 5", status, stderr)
		}
	})
	t.Run("stopped past the lease", func(t *testing.T) {
		pidFile := filepath.Join(t.TempDir(), "pid")
		c := startCtl(t, addr, []string{"PIDFILE=" + pidFile}, "run", "-lease", "300ms", "stop-long", "--", "sh", "-c",
			`echo $$ > "$PIDFILE"; while :; do sleep 0.01; done`)
		pgid := readPID(t, pidFile)
		killGroupAtEnd(t, pgid)
		next, err := client.New(client.Config{Address: addr}).Enqueue(t.Context(), "stop-long", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer next.Close()
		if err := c.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		select {
		case <-next.Granted(): // by the server's expiry
		case <-time.After(patience):
			t.Fatal("the lock was not handed on")
		}
		if st := procState(pgid); st != "T" {
			t.Fatalf("COMMAND in state %q when the lock was handed on; want stopped (T)", st)
		}
		if err := c.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		if status, _, stderr := c.wait(t); status != exitLost || !strings.Contains(stderr, "lock lost") {
			t.Fatalf("status %d, stderr %q; want %d", status, stderr, exitLost)
		}
		if groupAlive(pgid) {
			t.Fatal("COMMAND's group outlived the run")
		}
	})
}

// TestRunForceReleaseKillsPromptly: after a force release the next holder
// runs at once, so a COMMAND that ignores SIGTERM gets SIGKILL after
// min(0.1 × lease, releasedGrace), not after the give-up bound (here, with a
// 60 s lease, stopGrace); run says why.
func TestRunForceReleaseKillsPromptly(t *testing.T) {
	srv := startServer(t)
	addr := srv.Addr().String()
	c, pgid, next := runIgnoringTERM(t, addr, addr, "forced", "-lease", "60s")
	if _, ok, err := srv.ForceRelease(t.Context(), "forced", ""); err != nil || !ok {
		t.Fatalf("force release: %v, %v", ok, err)
	}
	select {
	case <-next.Granted():
	case <-time.After(patience):
		t.Fatal("the lock was not handed on")
	}
	status, _, stderr := c.wait(t)
	want := fmt.Sprintf("the next holder may run already; stopping the command (SIGKILL in %v)", releasedGrace)
	if status != exitLost || !strings.Contains(stderr, "server error 0x02") || !strings.Contains(stderr, want) {
		t.Fatalf("status %d, stderr %q; want %d and %q", status, stderr, exitLost, want)
	}
	if groupAlive(pgid) {
		t.Fatal("COMMAND's group outlived monolockctl run")
	}
}

// runIgnoringTERM starts 'monolockctl run FLAGS NAME' through ctlAddr with a
// COMMAND that ignores SIGTERM, and queues another client for NAME behind
// it at serverAddr; it returns the run, COMMAND's group and the next
// client's lock.
func runIgnoringTERM(t *testing.T, ctlAddr, serverAddr, name string, flags ...string) (*ctl, int, *client.Lock) {
	t.Helper()
	pidFile := filepath.Join(t.TempDir(), "pid")
	args := append(append([]string{"run"}, flags...), name, "--", "sh", "-c",
		`trap "" TERM; echo $$ > "$PIDFILE"; while :; do sleep 0.01; done`)
	c := startCtl(t, ctlAddr, []string{"PIDFILE=" + pidFile}, args...)
	pgid := readPID(t, pidFile)
	killGroupAtEnd(t, pgid)
	next, err := client.New(client.Config{Address: serverAddr}).Enqueue(t.Context(), name, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = next.Close() })
	return c, pgid, next
}
