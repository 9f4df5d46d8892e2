package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/monolock/monolock/internal/testsupport/proc"
)

// serverHost is one member of the pair: a network namespace running
// bin/monolock and keepalived with the shipped configuration and scripts.
type serverHost struct {
	name    string // "a" or "b"
	ns      string
	dir     string // this host's files: configuration, logs, pid files
	scripts string // deploy/keepalived, the scripts under test

	monoMu   sync.Mutex // orders the pid file's writes and removals across runs
	mono     *proc.Process
	monoRuns int
	audit    string // the audit log of the current monolock

	kp     *exec.Cmd
	kpDone chan struct{}
}

func newServerHost(name, ns, dir, scripts string) (*serverHost, error) {
	h := &serverHost{name: name, ns: ns, dir: filepath.Join(dir, name), scripts: scripts}
	if err := os.MkdirAll(h.dir, 0o700); err != nil {
		return nil, err
	}
	return h, os.WriteFile(h.path("systemctl"), []byte(fakeSystemctl(h.dir)), 0o755)
}

func (h *serverHost) path(name string) string { return filepath.Join(h.dir, name) }

// fakeSystemctl stands in for systemctl on a host without systemd: it logs
// every call (the harness reads the fence from it) and applies kill and stop
// to the monolock the harness started. start does nothing: the harness
// restarts the fenced server itself between rounds.
func fakeSystemctl(dir string) string {
	return `#!/bin/sh
echo "$(date +%s%N) $*" >> '` + dir + `/systemctl.log'
pid=$(cat '` + dir + `/monolock.pid' 2>/dev/null) || exit 0
case "$1" in
kill) sig=${2#--signal=}; kill -s "${sig#SIG}" "$pid" 2>/dev/null ;;
stop) kill -s TERM "$pid" 2>/dev/null ;;
esac
exit 0
`
}

// nsCommand runs argv inside the host's namespace, in a process group of its
// own, killed if the harness dies.
func nsCommand(ns string, env []string, argv ...string) *exec.Cmd {
	args := append([]string{"netns", "exec", ns, "env"}, env...)
	cmd := exec.Command("ip", append(args, argv...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd
}

// startMonolock starts the server inside the host's namespace with a new
// audit log, through proc: ready at its start line.
func (h *serverHost) startMonolock(bin string, shutdownDelay time.Duration) error {
	h.monoRuns++
	h.audit = h.path(fmt.Sprintf("audit-%d.jsonl", h.monoRuns))
	p, err := proc.Monolock(bin, proc.Options{
		Name:    "monolock of host " + h.name,
		Netns:   h.ns,
		Args:    []string{"-listen", "0.0.0.0:" + protoPort, "-ops-listen", "127.0.0.1:9090", "-audit-log", h.audit, "-shutdown-delay", shutdownDelay.String()},
		LogFile: h.path(fmt.Sprintf("monolock-%d.log", h.monoRuns)),
	})
	if err != nil {
		return err
	}
	// The fake systemctl signals the pid in this file (ip netns exec execs
	// monolock, so the pid is the server's) while this run is alive.
	pidFile := h.path("monolock.pid")
	h.monoMu.Lock()
	defer h.monoMu.Unlock()
	h.mono = p
	go func() {
		<-p.Done()
		h.monoMu.Lock()
		defer h.monoMu.Unlock()
		if h.mono == p { // not a later run's file
			_ = os.Remove(pidFile)
		}
	}()
	return os.WriteFile(pidFile, []byte(fmt.Sprint(p.Pid())), 0o600)
}

// monoAlive reports whether the current monolock process still runs.
func (h *serverHost) monoAlive() bool { return h.mono != nil && h.mono.Alive() }

func (h *serverHost) signalMonolock(sig syscall.Signal) error {
	if !h.monoAlive() {
		return errors.New("monolock of host " + h.name + " is not running")
	}
	return h.mono.Signal(sig)
}

// stopMonolock kills the server (a stopped one too) if it still runs and
// waits for it.
func (h *serverHost) stopMonolock() {
	if h.monoAlive() {
		_ = h.mono.Signal(syscall.SIGCONT)
		h.mono.Kill()
	}
}

// renderKeepalived turns the shipped keepalived.conf into this host's: the
// script paths point at deploy/keepalived, and host b gets its own router
// id, priority and unicast addresses. Every other line is the shipped one;
// a replacement that finds nothing is an error, so that a change of the
// shipped file cannot silently leave the harness testing something else.
func renderKeepalived(shipped, scripts, host string) (string, error) {
	type edit struct{ old, new string }
	edits := []edit{{"/etc/keepalived/", scripts + "/"}}
	if host == "b" {
		edits = append(edits,
			edit{"router_id monolock_a", "router_id monolock_b"},
			edit{"priority 150", "priority 100"},
			edit{"unicast_src_ip " + addrA, "unicast_src_ip " + addrB},
			edit{"\n        " + addrB + " ", "\n        " + addrA + " "},
		)
	}
	out := shipped
	for _, e := range edits {
		if !strings.Contains(out, e.old) {
			return "", fmt.Errorf("keepalived.conf has no %q: the harness's rendering is out of date", strings.TrimSpace(e.old))
		}
		out = strings.ReplaceAll(out, e.old, e.new)
	}
	for _, want := range []string{"interface " + hostIface, vip + prefixLen + " dev " + hostIface} {
		if !strings.Contains(out, want) {
			return "", fmt.Errorf("keepalived.conf has no %q: the harness's network is out of date", want)
		}
	}
	return out, nil
}

// startKeepalived runs keepalived in the foreground (-n), logging to its
// console (-l), VRRP only (-P), with pid files of its own.
func (h *serverHost) startKeepalived(shipped string) error {
	conf, err := renderKeepalived(shipped, h.scripts, h.name)
	if err != nil {
		return err
	}
	if err := os.WriteFile(h.path("keepalived.conf"), []byte(conf), 0o644); err != nil {
		return err
	}
	logFile, err := os.Create(h.path("keepalived.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	env := []string{"SYSTEMCTL=" + h.path("systemctl"), "MONOLOCK_VRRP_STATE_DIR=" + h.path("vrrp")}
	cmd := nsCommand(h.ns, env, "keepalived", "-n", "-l", "-D", "-P", "-f", h.path("keepalived.conf"),
		"-p", h.path("keepalived.pid"), "-r", h.path("vrrp.pid"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return err
	}
	h.kp, h.kpDone = cmd, make(chan struct{})
	done := h.kpDone
	go func() { _ = cmd.Wait(); close(done) }()
	return nil
}

// stopKeepalived asks keepalived to stop and kills what is left of it (its
// VRRP child included) after a grace.
func (h *serverHost) stopKeepalived() {
	if h.kp == nil {
		return
	}
	_ = syscall.Kill(-h.kp.Process.Pid, syscall.SIGTERM)
	select {
	case <-h.kpDone:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-h.kp.Process.Pid, syscall.SIGKILL)
		<-h.kpDone
	}
	if pid, err := readPid(h.path("vrrp.pid")); err == nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	h.kp = nil
}

// vrrpState is the last state the notify script recorded (MASTER, BACKUP,
// FAULT, STOP), "" before the first call.
func (h *serverHost) vrrpState() string {
	b, _ := os.ReadFile(filepath.Join(h.path("vrrp"), "state"))
	return strings.TrimSpace(string(b))
}

// fences returns the times of the notify script's fence (its kill call)
// after t.
func (h *serverHost) fences(after time.Time) []time.Time {
	b, _ := os.ReadFile(h.path("systemctl.log"))
	var out []time.Time
	for _, line := range strings.Split(string(b), "\n") {
		var ns int64
		var verb string
		if _, err := fmt.Sscan(line, &ns, &verb); err != nil || verb != "kill" {
			continue
		}
		if at := time.Unix(0, ns); at.After(after) {
			out = append(out, at)
		}
	}
	return out
}

func readPid(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var pid int
	_, err = fmt.Sscan(string(b), &pid)
	return pid, err
}
