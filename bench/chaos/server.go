package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// serverProc is one run of bin/monolock as a child process.
type serverProc struct {
	cmd       *exec.Cmd
	addr      string
	auditPath string
	startedAt time.Time // taken before the spawn
	stoppedAt time.Time // SIGTERM sent
	exitedAt  time.Time
	done      chan struct{} // closed when the process has exited
	waitErr   error         // valid after done

	mu   sync.Mutex
	tail []string // last lines of its stderr
}

const (
	startTimeout = 15 * time.Second
	// stopTimeout bounds a graceful shutdown; the server's own grace is 10s.
	stopTimeout = 15 * time.Second
)

// startServer runs bin on addr with its audit log at auditPath and its
// diagnostics copied to logPath, and returns once it reports "monolock
// started" on the expected address.
func startServer(bin, addr, auditPath, logPath string) (*serverProc, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-listen", addr, "-audit-log", auditPath, "-log-format", "json", "-log-level", "info")
	// Its own process group, and killed if the harness dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		_ = logf.Close()
		return nil, err
	}
	s := &serverProc{cmd: cmd, auditPath: auditPath, done: make(chan struct{})}
	s.startedAt = time.Now().Round(0)
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	listening := make(chan string, 1)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		defer func() { _ = logf.Close() }()
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		found := false
		for sc.Scan() {
			line := sc.Text()
			_, _ = fmt.Fprintln(logf, line)
			s.mu.Lock()
			s.tail = append(s.tail, line)
			if len(s.tail) > 10 {
				s.tail = s.tail[1:]
			}
			s.mu.Unlock()
			if found {
				continue
			}
			var m struct {
				Message string `json:"message"`
				Listen  string `json:"listen"`
			}
			if json.Unmarshal([]byte(line), &m) == nil && m.Message == "monolock started" {
				found = true
				listening <- m.Listen
			}
		}
	}()
	go func() {
		<-scanned // Wait closes the pipe; read it to the end first
		s.waitErr = cmd.Wait()
		s.exitedAt = time.Now().Round(0)
		close(s.done)
	}()
	select {
	case got := <-listening:
		if got != addr {
			s.kill()
			return nil, fmt.Errorf("server reports listening on %q, want %q", got, addr)
		}
		s.addr = got
		return s, nil
	case <-s.done:
		return nil, fmt.Errorf("server exited before it started (%v): %s", s.waitErr, s.lastLines())
	case <-time.After(startTimeout):
		s.kill()
		return nil, fmt.Errorf("server did not report \"monolock started\" within %v: %s", startTimeout, s.lastLines())
	}
}

func (s *serverProc) lastLines() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.tail, " | ")
}

// exited reports whether the process has ended.
func (s *serverProc) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM and waits for the exit. It returns "" after a clean exit
// (status 0), else a description of what went wrong.
func (s *serverProc) stop() string {
	if s.exited() {
		return fmt.Sprintf("exited on its own before SIGTERM (%v): %s", s.waitErr, s.lastLines())
	}
	s.stoppedAt = time.Now().Round(0)
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Sprintf("SIGTERM: %v", err)
	}
	select {
	case <-s.done:
	case <-time.After(stopTimeout):
		s.kill()
		return fmt.Sprintf("did not exit within %v of SIGTERM; killed", stopTimeout)
	}
	if s.waitErr != nil {
		return fmt.Sprintf("exit after SIGTERM: %v (want status 0): %s", s.waitErr, s.lastLines())
	}
	return ""
}

// kill ends the process group at once and waits for the exit.
func (s *serverProc) kill() {
	if s.exited() {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.done
}

// freeLoopbackPort picks a port the kernel considers free right now.
func freeLoopbackPort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}
