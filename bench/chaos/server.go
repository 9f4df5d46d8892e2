package main

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/monolock/monolock/internal/testsupport/proc"
)

// serverProc is one run of bin/monolock as a child process.
type serverProc struct {
	*proc.Process
	auditPath string
	startedAt time.Time // taken before the spawn
	stoppedAt time.Time // SIGTERM sent
	exitedAt  time.Time
}

const (
	startTimeout = 15 * time.Second
	// stopTimeout bounds a graceful shutdown; the server's own grace is 10s.
	stopTimeout = 15 * time.Second
)

// startServer runs bin on addr with its audit log at auditPath and its
// diagnostics copied to logPath, and returns once it is ready (proc's
// readiness contract) on the expected address.
func startServer(bin, addr, auditPath, logPath string) (*serverProc, error) {
	p, err := proc.Monolock(bin, proc.Options{
		Args:         []string{"-listen", addr, "-audit-log", auditPath, "-log-level", "info"},
		LogFile:      logPath,
		StartTimeout: startTimeout,
		StopGrace:    stopTimeout,
	})
	if err != nil {
		return nil, err
	}
	if p.Addr != addr {
		p.Kill()
		return nil, fmt.Errorf("server reports listening on %q, want %q", p.Addr, addr)
	}
	return &serverProc{Process: p, auditPath: auditPath, startedAt: p.SpawnedAt}, nil
}

// stop sends SIGTERM and waits for the exit. It returns "" after a clean exit
// (status 0), else a description of what went wrong.
func (s *serverProc) stop() string {
	defer func() { s.exitedAt = s.ExitedAt() }()
	if !s.Alive() {
		return fmt.Sprintf("exited on its own before SIGTERM (%v): %s", s.Err(), s.Tail())
	}
	s.stoppedAt = time.Now().Round(0)
	err := s.Stop()
	switch {
	case errors.Is(err, proc.ErrKilled):
		return fmt.Sprintf("did not exit within %v of SIGTERM; killed", stopTimeout)
	case err != nil:
		return fmt.Sprintf("exit after SIGTERM: %v (want status 0): %s", err, s.Tail())
	}
	return ""
}

// kill ends the process group at once and waits for the exit.
func (s *serverProc) kill() { s.Kill() }

// freeLoopbackPort picks a port the kernel considers free right now.
func freeLoopbackPort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}
