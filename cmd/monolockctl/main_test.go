package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/monolock/monolock/eventloop"
	"github.com/monolock/monolock/internal/testsupport/inproc"
	"github.com/monolock/monolock/internal/testsupport/proc"
	"github.com/monolock/monolock/internal/testsupport/wire"
)

// patience bounds every wait for something that must happen.
const patience = 10 * time.Second

// ctlPath is the monolockctl binary built for the end-to-end tests.
var ctlPath string

func TestMain(m *testing.M) {
	var err error
	if ctlPath, err = proc.Binary("./cmd/monolockctl"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	proc.Cleanup()
	os.Exit(code)
}

// startServer starts a real server on a free loopback port for one test.
func startServer(t *testing.T) *inproc.Server {
	t.Helper()
	return inproc.Start(t, eventloop.Config{IOTimeout: 5 * time.Second})
}

// ctl is one monolockctl process.
type ctl struct {
	cmd    *exec.Cmd
	stdout *bufio.Reader // read by waitLine and wait
	seen   bytes.Buffer  // stdout read so far
	stderr bytes.Buffer
}

// startCtl starts monolockctl with args against addr, with a clean
// environment apart from extraEnv.
func startCtl(t *testing.T, addr string, extraEnv []string, args ...string) *ctl {
	t.Helper()
	if addr != "" {
		args = append([]string{args[0], "-addr", addr}, args[1:]...)
	}
	c := &ctl{cmd: exec.Command(ctlPath, args...)}
	c.cmd.Env = append(cleanEnv(), extraEnv...)
	c.cmd.Stderr = &c.stderr
	pipe, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.stdout = bufio.NewReader(pipe)
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.cmd.Process.Kill() })
	return c
}

// cleanEnv is the test's environment without MONOLOCK_ variables.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MONOLOCK_") {
			env = append(env, kv)
		}
	}
	return env
}

// waitLine reads stdout until a line equal to want.
func (c *ctl) waitLine(t *testing.T, want string) {
	t.Helper()
	found := make(chan error, 1)
	go func() {
		for {
			line, err := c.stdout.ReadString('\n')
			c.seen.WriteString(line)
			if strings.TrimSpace(line) == want {
				found <- nil
				return
			}
			if err != nil {
				found <- fmt.Errorf("stdout ended before %q: %v", want, err)
				return
			}
		}
	}()
	select {
	case err := <-found:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(patience):
		t.Fatalf("no line %q on stdout within %v", want, patience)
	}
}

// wait waits for the process to exit and returns its status and outputs.
func (c *ctl) wait(t *testing.T) (status int, stdout, stderr string) {
	t.Helper()
	rest := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(c.stdout)
		rest <- string(b)
	}()
	exited := make(chan error, 1)
	go func() {
		out := <-rest
		c.seen.WriteString(out)
		exited <- c.cmd.Wait()
	}()
	select {
	case <-exited:
	case <-time.After(patience):
		_ = c.cmd.Process.Kill()
		t.Fatalf("monolockctl %v did not exit within %v", c.cmd.Args[1:], patience)
	}
	return c.cmd.ProcessState.ExitCode(), c.seen.String(), c.stderr.String()
}

// runCtl runs monolockctl to completion.
func runCtl(t *testing.T, addr string, extraEnv []string, args ...string) (status int, stdout, stderr string) {
	t.Helper()
	return startCtl(t, addr, extraEnv, args...).wait(t)
}

// closedAddr returns a loopback address that nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	return wire.ClosedAddr(t)
}

// usageCase is a command line that only prints help or a usage error.
type usageCase struct {
	args   []string
	status int
	want   string // in stdout for status 0, else in stderr
}

// checkUsage runs each case and checks its exit status and message.
func checkUsage(t *testing.T, cases []usageCase) {
	t.Helper()
	for _, tc := range cases {
		status, stdout, stderr := runCtl(t, "", nil, tc.args...)
		out := stderr
		if tc.status == 0 {
			out = stdout
		}
		if status != tc.status || !strings.Contains(out, tc.want) {
			t.Errorf("%v: status %d, stdout %q, stderr %q; want %d and %q", tc.args, status, stdout, stderr, tc.status, tc.want)
		}
	}
}
