// Package testetcd runs a throwaway one-member etcd for the tests of
// failover through etcd: Debian's etcd-server (make etcd-deps installs it),
// on loopback ports picked at run time, its data in the test's temporary
// directory. The test's cleanup kills it and removes its data, also when
// the test fails.
package testetcd

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/monolock/monolock/internal/testsupport/proc"
)

// readyLine is what etcd (3.4 and 3.5, plain HTTP) logs once it serves
// clients: "serving client traffic insecurely; ...".
const readyLine = "serving client traffic"

// Server is a running etcd.
type Server struct {
	// Endpoint is its client URL, http://127.0.0.1:PORT.
	Endpoint string
	child    *proc.Child
}

// Start runs etcd for t and returns once it serves clients. Without etcd
// installed it fails the test, saying how to install it, unless
// MONOLOCK_TEST_SKIP_DATABASES=1 skips what needs a server the machine
// lacks (as the fence tests do).
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		if os.Getenv("MONOLOCK_TEST_SKIP_DATABASES") == "1" {
			t.Skip("etcd is not installed and MONOLOCK_TEST_SKIP_DATABASES=1")
		}
		t.Fatal("etcd is not installed: run make etcd-deps (Debian's etcd-server, as root), or set MONOLOCK_TEST_SKIP_DATABASES=1 to skip the tests that need it")
	}
	cport, pport := freePort(t), freePort(t)
	dir := t.TempDir()
	curl := "http://127.0.0.1:" + strconv.Itoa(cport)
	purl := "http://127.0.0.1:" + strconv.Itoa(pport)
	c, err := proc.StartChild(bin, proc.ChildOptions{Name: "etcd", NoInput: true, Args: []string{
		"--name", "test", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", curl, "--advertise-client-urls", curl,
		"--listen-peer-urls", purl, "--initial-advertise-peer-urls", purl,
		"--initial-cluster", "test=" + purl, "--initial-cluster-state", "new",
		"--logger", "zap", "--log-outputs", "stdout", "--log-level", "info",
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Kill)
	for {
		line, err := c.Next(30 * time.Second)
		if err != nil {
			t.Fatalf("etcd did not log %q: %v; stderr: %s", readyLine, err, c.Stderr())
		}
		if strings.Contains(line.Text, readyLine) {
			break
		}
	}
	go func() { // its later lines: nobody reads them, and etcd must not block on them
		for range c.Lines() {
		}
	}()
	return &Server{Endpoint: curl, child: c}
}

// Kill stops etcd at once.
func (s *Server) Kill() { s.child.Kill() }

// freePort asks the kernel for a free loopback port. etcd takes a port
// number, not a listener, so another process may take it meanwhile; on a
// test machine that is rare enough.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(fmt.Errorf("testetcd: pick a port: %w", err))
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
