package scenario

import (
	"errors"
	"fmt"
	"github.com/monolock/monolock/bench/floor"
	"github.com/monolock/monolock/bench/report"
	"github.com/monolock/monolock/internal/testsupport/proc"
	"path/filepath"
	"time"
)

// errExited is returned by measurements whose server died under them.
var errExited = errors.New("server process exited")

// servers knows how to start the two servers under test.
type servers struct {
	monolockBin string
	selfBin     string
	logDir      string
	n           int
	version     string      // what the first monolock reported
	procs       *proc.Group // every server it started, stopped at the end or on an interrupt
}

func (s *servers) logPath(tag string) string {
	s.n++
	if s.logDir == "" {
		return ""
	}
	return filepath.Join(s.logDir, fmt.Sprintf("%02d-%s.log", s.n, tag))
}

// monolock starts bin/monolock on a free loopback port.
func (s *servers) monolock(tag string) (*proc.Process, error) { return s.monolockWith(tag) }

// monolockWith starts bin/monolock on a free loopback port with extra flags.
func (s *servers) monolockWith(tag string, extra ...string) (*proc.Process, error) {
	args := append([]string{"-log-level", "info"}, extra...) // proc.Monolock adds -listen 127.0.0.1:0 -log-format json
	c, err := proc.Monolock(s.monolockBin, s.options("monolock", s.logPath("monolock-"+tag), args))
	if err == nil && s.version == "" {
		s.version = c.Version
	}
	return c, err
}

// floor starts the bare gnet server (this binary's floor-server subcommand).
func (s *servers) floor(tag string) (*proc.Process, error) {
	o := s.options(report.SysBareGnet, s.logPath("floor-"+tag), []string{"floor-server", "-listen", "127.0.0.1:0"})
	o.StartLine = floor.Started
	return proc.Start(s.selfBin, o)
}

// floorGoAccept starts the bare gnet server that accepts the EMFILE-safe way
// (a Go listener and EnrollContext), the floor of monolock's accept path.
func (s *servers) floorGoAccept(tag string) (*proc.Process, error) {
	o := s.options(report.SysFloorSafe, s.logPath("floor-go-accept-"+tag), []string{"floor-server", "-go-accept", "-listen", "127.0.0.1:0"})
	o.StartLine = floor.Started
	return proc.Start(s.selfBin, o)
}

// options are the harness's settings for the servers it measures.
func (s *servers) options(name, logPath string, args []string) proc.Options {
	return proc.Options{Name: name, Args: args, LogFile: logPath, StartTimeout: 15 * time.Second, StopGrace: 5 * time.Second, Group: s.procs}
}
