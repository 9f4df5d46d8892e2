package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// child is a server process the harness started and measures through /proc.
type child struct {
	name    string
	cmd     *exec.Cmd
	addr    string // the listen address it reported
	version string // the version it reported, if any
	done    chan struct{}
	err     error // Wait's result, valid after done

	mu   sync.Mutex
	tail []string // last lines of its output, for error messages
}

// Pid is the child's process id.
func (c *child) Pid() int { return c.cmd.Process.Pid }

// children are stopped on exit, including on an interrupt.
var (
	childMu  sync.Mutex
	children = map[*child]bool{}
)

// startServer runs bin with args and waits for a JSON log line on stderr
// whose "message" is startedMsg; its "listen" field is the address. The
// child's output goes on to logPath.
func startServer(name, bin string, args []string, startedMsg, logPath string, env []string) (*child, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = nil
	var logw io.Writer = io.Discard
	var logf *os.File
	if logPath != "" {
		if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err == nil {
			if f, err := os.Create(logPath); err == nil {
				logf, logw = f, f
			}
		}
	}
	if err := cmd.Start(); err != nil {
		if logf != nil {
			_ = logf.Close()
		}
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, done: make(chan struct{})}
	childMu.Lock()
	children[c] = true
	childMu.Unlock()

	addrc := make(chan [2]string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		found := false
		for sc.Scan() {
			line := sc.Text()
			_, _ = fmt.Fprintln(logw, line)
			c.mu.Lock()
			c.tail = append(c.tail, line)
			if len(c.tail) > 20 {
				c.tail = c.tail[1:]
			}
			c.mu.Unlock()
			if found {
				continue
			}
			var m struct {
				Message string `json:"message"`
				Listen  string `json:"listen"`
				Version string `json:"version"`
			}
			if json.Unmarshal([]byte(line), &m) == nil && m.Message == startedMsg && m.Listen != "" {
				found = true
				addrc <- [2]string{m.Listen, m.Version}
			}
		}
		if logf != nil {
			_ = logf.Close()
		}
	}()
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	select {
	case a := <-addrc:
		c.addr, c.version = a[0], a[1]
		return c, nil
	case <-c.done:
		c.forget()
		return nil, fmt.Errorf("%s exited before it started listening (%v): %s", name, c.err, c.lastLines())
	case <-time.After(15 * time.Second):
		c.Stop()
		return nil, fmt.Errorf("%s did not report its address within 15s: %s", name, c.lastLines())
	}
}

func (c *child) lastLines() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.tail, " | ")
}

// Alive reports whether the process is still running.
func (c *child) Alive() bool {
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// Stop sends SIGTERM, waits up to five seconds, then kills the group.
func (c *child) Stop() {
	if c == nil {
		return
	}
	defer c.forget()
	if !c.Alive() {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
		return
	case <-time.After(5 * time.Second):
	}
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	<-c.done
}

func (c *child) forget() {
	childMu.Lock()
	delete(children, c)
	childMu.Unlock()
}

// stopAllChildren kills whatever is still running (on interrupt or exit).
func stopAllChildren() {
	childMu.Lock()
	cs := make([]*child, 0, len(children))
	for c := range children {
		cs = append(cs, c)
	}
	childMu.Unlock()
	for _, c := range cs {
		c.Stop()
	}
}

// errExited is returned by measurements whose server died under them.
var errExited = errors.New("server process exited")

// servers knows how to start the two servers under test.
type servers struct {
	monolockBin string
	selfBin     string
	logDir      string
	n           int
	version     string // what the first monolock reported
}

func (s *servers) logPath(tag string) string {
	s.n++
	if s.logDir == "" {
		return ""
	}
	return filepath.Join(s.logDir, fmt.Sprintf("%02d-%s.log", s.n, tag))
}

// monolock starts bin/monolock on a free loopback port.
func (s *servers) monolock(tag string) (*child, error) { return s.monolockWith(tag) }

// monolockWith starts bin/monolock on a free loopback port with extra flags.
func (s *servers) monolockWith(tag string, extra ...string) (*child, error) {
	args := append([]string{"-listen", "127.0.0.1:0", "-log-format", "json", "-log-level", "info"}, extra...)
	c, err := startServer("monolock", s.monolockBin, args,
		"monolock started", s.logPath("monolock-"+tag), nil)
	if err == nil && s.version == "" {
		s.version = c.version
	}
	return c, err
}

// floor starts the bare gnet server (this binary's floor-server subcommand).
func (s *servers) floor(tag string) (*child, error) {
	return startServer(sysBareGnet, s.selfBin, []string{"floor-server", "-listen", "127.0.0.1:0"},
		"floor-server started", s.logPath("floor-"+tag), nil)
}
