// Package testdb runs throwaway PostgreSQL and MariaDB servers for tests,
// from Debian's binaries (make fence-deps installs them): each on a port
// picked at run time, listening on 127.0.0.1 only, with its data in a fresh
// temporary directory that Close removes. The server is a child process in a
// process group of its own, killed with the test process (Pdeathsig) if that
// dies first. They skip flushing at commit unless started with Durable.
//
// Both servers refuse to run as root, so under root they run as the user
// nobody (SysProcAttr.Credential) and their data directory belongs to it.
//
// Tests in every language find the servers through two environment
// variables, which the withdb command sets (see its package):
//
//	MONOLOCK_TEST_POSTGRES=postgres://monolock@127.0.0.1:PORT/postgres?sslmode=disable
//	MONOLOCK_TEST_MYSQL=mysql://root@127.0.0.1:PORT/monolock_test
package testdb

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The environment variables that carry the servers' URLs to tests.
const (
	EnvPostgres = "MONOLOCK_TEST_POSTGRES"
	EnvMySQL    = "MONOLOCK_TEST_MYSQL"
)

// ErrNotInstalled is the cause when a server's programs are missing.
var ErrNotInstalled = errors.New("not installed")

// startTimeout bounds initialisation plus start-up of one server.
const startTimeout = time.Minute

// Server is a running test database.
type Server struct {
	// URL is the server's address as a URL (the form of EnvPostgres and
	// EnvMySQL).
	URL string
	// Port is its TCP port on 127.0.0.1.
	Port int

	name    string
	dir     string
	cmd     *exec.Cmd
	exited  chan struct{}
	log     *tail
	closeMu sync.Once
}

// Close kills the server's process group, waits for it and removes its
// data. The data is throwaway, so the server gets no shutdown to finish.
func (s *Server) Close() error {
	s.closeMu.Do(func() {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.exited
	})
	return os.RemoveAll(s.dir)
}

// Pid is the server's main process (PostgreSQL's postmaster), the leader of
// its process group.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Log returns the server's last lines of output, for a failing test.
func (s *Server) Log() string { return s.log.String() }

// dataDir makes the temporary directory a server keeps its data in, owned
// by the user it runs as (nobody under root: a t.TempDir's parents are
// root's and closed to it, so the directory is made under os.TempDir).
func dataDir(prefix string, cred *syscall.Credential) (string, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", fmt.Errorf("testdb: make the data directory: %w", err)
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			_ = os.RemoveAll(dir)
			return "", fmt.Errorf("testdb: give %s to uid %d: %w", dir, cred.Uid, err)
		}
	}
	return dir, nil
}

// credential is the user a database server runs as: nobody under root
// (PostgreSQL and MariaDB refuse root), else the caller (nil).
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		return nil, fmt.Errorf("testdb: the databases do not run as root and there is no user nobody to run them as: %w", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

// freePort asks the kernel for a free port on 127.0.0.1. The servers take a
// port number, not a listener, so there is a window in which another
// process may take it; start retries with a new port when the server says
// so.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("testdb: pick a port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// command makes a child that runs as cred, in a process group of its own,
// and dies with this process.
func command(cred *syscall.Credential, bin string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: cred}
	return cmd
}

// initialise runs a data directory's set-up command to its end.
func initialise(cmd *exec.Cmd) error {
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("testdb: %s: %w\n%s", strings.Join(cmd.Args, " "), err, lastLines(string(out), 20))
	}
	return nil
}

// errPortTaken says that the server lost its port to another process.
var errPortTaken = errors.New("port taken")

// serve starts cmd and waits until a line of its output contains ready. A
// line containing one of portTaken means another process took the port.
func serve(name, dir string, cmd *exec.Cmd, ready string, portTaken []string) (*Server, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("testdb: start %s (install it with make fence-deps): %w", name, err)
	}
	w.Close()
	s := &Server{name: name, dir: dir, cmd: cmd, exited: make(chan struct{}), log: &tail{}}
	readyc := make(chan struct{})
	taken := make(chan struct{}, 1)
	go s.scan(r, ready, portTaken, readyc, taken)
	go func() { _ = cmd.Wait(); close(s.exited) }()
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case <-readyc:
		return s, nil
	case <-taken:
		s.kill()
		return nil, errPortTaken
	case <-s.exited:
		return nil, fmt.Errorf("testdb: %s exited before it was ready (%v):\n%s", name, cmd.ProcessState, s.Log())
	case <-timer.C:
		s.kill()
		return nil, fmt.Errorf("testdb: %s was not ready within %v:\n%s", name, startTimeout, s.Log())
	}
}

func (s *Server) kill() {
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.exited
}

func (s *Server) scan(r io.ReadCloser, ready string, portTaken []string, readyc, taken chan<- struct{}) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	isReady := false
	for sc.Scan() {
		line := sc.Text()
		s.log.add(line)
		if !isReady && strings.Contains(line, ready) {
			isReady = true
			close(readyc)
		}
		for _, p := range portTaken {
			if !isReady && strings.Contains(line, p) {
				select {
				case taken <- struct{}{}:
				default:
				}
			}
		}
	}
}

// start initialises a data directory and starts a server on a fresh port,
// trying again with another port if one was taken meanwhile.
func start(name, prefix string, launch func(dir string, port int, cred *syscall.Credential) (*Server, error)) (*Server, error) {
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := dataDir(prefix, cred)
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		port, err := freePort()
		if err == nil {
			var s *Server
			s, err = launch(dir, port, cred)
			if err == nil {
				return s, nil
			}
		}
		if !errors.Is(err, errPortTaken) || attempt == 3 {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("testdb: %s: %w", name, err)
		}
	}
}

// tail keeps the last lines of a server's output.
type tail struct {
	mu    sync.Mutex
	lines []string
}

const tailLines = 40

func (t *tail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == tailLines {
		t.lines = t.lines[1:]
	}
	t.lines = append(t.lines, line)
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// binary finds a server program: on PATH, else in the directories Debian's
// packages put it in.
func binary(name string, dirs ...string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range dirs {
		matches, _ := filepath.Glob(filepath.Join(d, name))
		if len(matches) > 0 {
			return matches[len(matches)-1], nil // the highest version
		}
	}
	return "", fmt.Errorf("testdb: %s is %w: run make fence-deps (Debian's postgresql and mariadb-server)", name, ErrNotInstalled)
}
