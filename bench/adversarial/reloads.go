package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/monolock/monolock/internal/certs/certstest"
	"github.com/monolock/monolock/internal/testsupport/proc"
)

// Attack 17, reloads that must not hold the server: servers of its own with
// TLS, an ACL and an audit log, each given at one of those paths what a
// SIGHUP reload must not read.
//
//   - A FIFO nobody writes to, at the ACL, the client CA and the audit log's
//     path (a plain open of it waits for ever, as on a hung mount), then
//     SIGHUP and at once SIGTERM: the server must exit within exitWithin of
//     the SIGTERM.
//   - A 256 MiB file (sparse) at the ACL and the client CA path, then SIGHUP:
//     the reload must be refused with its log line, and the server's peak
//     resident set must stay within rssGrowth of what it was.
const (
	exitWithin = time.Second
	rssGrowth  = 64 << 20
	hugeFile   = 256 << 20
	// reloadGiveUp is how long the attack waits for what a fixed server does
	// at once before it calls it a violation and kills the server.
	reloadGiveUp = 10 * time.Second
)

// reloadServer is one server of the attack with the files it was given.
type reloadServer struct {
	p                    *proc.Process
	acl, clientCA, audit string
}

func startReloadServer(e *env, name string) (*reloadServer, error) {
	dir := filepath.Join(e.dir, "reloads-"+name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	pki, err := certstest.Generate(dir)
	if err != nil {
		return nil, err
	}
	s := &reloadServer{acl: filepath.Join(dir, "acl.json"), clientCA: pki.CA, audit: filepath.Join(dir, "audit.jsonl")}
	if err := os.WriteFile(s.acl, []byte(`{"rules": [{"identity": "`+certstest.ClientURI+`", "locks": ["*"]}]}`), 0o600); err != nil {
		return nil, err
	}
	s.p, err = e.startServer(filepath.Join(dir, "server.log"), "-tls-cert", pki.Server.Cert, "-tls-key", pki.Server.Key,
		"-tls-client-ca", pki.CA, "-acl-file", s.acl, "-audit-log", s.audit)
	return s, err
}

func runReloads(ctx context.Context, e *env) string {
	var out []string
	for _, at := range []string{"ACL", "client CA", "audit log"} {
		out = append(out, fifoReload(e, at))
	}
	for _, at := range []string{"ACL", "client CA"} {
		out = append(out, hugeReload(e, at))
	}
	<-ctx.Done()
	return strings.Join(out, "; ")
}

func (s *reloadServer) path(at string) string {
	switch at {
	case "ACL":
		return s.acl
	case "client CA":
		return s.clientCA
	}
	return s.audit
}

// fifoReload puts a FIFO at the path, sends SIGHUP then SIGTERM, and says
// how long the server took to exit.
func fifoReload(e *env, at string) string {
	s, err := startReloadServer(e, "fifo-"+strings.ReplaceAll(at, " ", "-"))
	if err != nil {
		return fmt.Sprintf("FIFO at the %s: %s could not start: %v", at, violation, err)
	}
	defer s.p.Kill()
	path := s.path(at)
	if err := os.Rename(path, path+".moved"); err != nil {
		return fmt.Sprintf("FIFO at the %s: could not set up: %v", at, err)
	}
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		return fmt.Sprintf("FIFO at the %s: could not set up: %v", at, err)
	}
	if err := s.p.Signal(syscall.SIGHUP); err != nil {
		return fmt.Sprintf("FIFO at the %s: SIGHUP: %v", at, err)
	}
	// SIGTERM once the reload is under way: refused (its line), or blocked
	// in the FIFO's open. Sent at once, it could overtake the SIGHUP.
	reload := s.awaitReload(at)
	sent := time.Now()
	if err := s.p.Signal(syscall.SIGTERM); err != nil {
		return fmt.Sprintf("FIFO at the %s: SIGTERM: %v", at, err)
	}
	if !s.p.WaitExit(reloadGiveUp) {
		return fmt.Sprintf("FIFO at the %s: reload %s, %s still running %v after SIGTERM", at, reload, violation, reloadGiveUp)
	}
	took := s.p.ExitedAt().Sub(sent)
	verdict := "exit"
	if took > exitWithin {
		verdict = violation + " exit"
	}
	return fmt.Sprintf("FIFO at the %s: reload %s, %s %d ms after SIGTERM", at, reload, verdict, took.Milliseconds())
}

// reloadLines are the lines a reload logs when it refuses the file at.
var reloadLines = map[string]string{
	"ACL":       "SIGHUP: ACL not reloaded",
	"client CA": "SIGHUP: TLS files not reloaded",
	"audit log": "SIGHUP: cannot reopen the audit log",
}

// awaitReload waits, up to reloadGiveUp, until the reload after SIGHUP has
// either logged its refusal of the file at, or has a thread blocked in the
// open of the FIFO (the kernel's wait_for_partner), and says which.
func (s *reloadServer) awaitReload(at string) string {
	logged := make(chan error, 1)
	go func() {
		_, err := s.p.WaitLog(reloadLines[at], reloadGiveUp)
		logged <- err
	}()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-logged:
			if err != nil {
				return "neither refused nor seen blocked"
			}
			return "refused"
		case <-tick.C:
			if blockedOnFIFO(s.p.Pid()) {
				return "blocked in the FIFO's open"
			}
		}
	}
}

// blockedOnFIFO reports whether a thread of pid waits in the open of a FIFO
// for its other end.
func blockedOnFIFO(pid int) bool {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/wchan", pid))
	for _, t := range tasks {
		if b, err := os.ReadFile(t); err == nil && strings.TrimSpace(string(b)) == "wait_for_partner" {
			return true
		}
	}
	return false
}

// hugeReload puts a 256 MiB file at the path, sends SIGHUP and compares the
// server's peak resident set before and after the reload's log line.
func hugeReload(e *env, at string) string {
	s, err := startReloadServer(e, "huge-"+strings.ReplaceAll(at, " ", "-"))
	if err != nil {
		return fmt.Sprintf("256 MiB at the %s: %s could not start: %v", at, violation, err)
	}
	defer func() { _ = s.p.Stop() }()
	before := peakResident(s.p.Pid())
	if err := os.Truncate(s.path(at), hugeFile); err != nil {
		return fmt.Sprintf("256 MiB at the %s: could not set up: %v", at, err)
	}
	if err := s.p.Signal(syscall.SIGHUP); err != nil {
		return fmt.Sprintf("256 MiB at the %s: SIGHUP: %v", at, err)
	}
	line, err := s.p.WaitLog(reloadLines[at], reloadGiveUp)
	if err != nil {
		return fmt.Sprintf("256 MiB at the %s: %s %v", at, violation, err)
	}
	after := peakResident(s.p.Pid())
	verdict := ""
	why, _ := line["error"].(string)
	if !strings.Contains(why, "file too large") {
		verdict = violation + " not refused by its size, "
	}
	if after-before > rssGrowth {
		verdict += violation + " "
	}
	return fmt.Sprintf("256 MiB at the %s: %speak RSS %d → %d MiB", at, verdict, before>>20, after>>20)
}

// peakResident reads VmHWM, the most pid ever had resident; 0 when it cannot.
func peakResident(pid int) int64 { return procStatusKB(pid, "VmHWM:") }
