// Package proc runs the servers of the tests and harnesses as child
// processes: it builds a binary once per test binary (Build), starts it,
// waits until it is ready, exposes its bound addresses, collects its JSON
// log lines and stops it.
//
// # Readiness
//
// A monolock server is ready when, started with -log-format json, it has
// written its start line to stderr:
//
//	{"level":"info","version":"…","listen":"127.0.0.1:40123","ops_listen":"127.0.0.1:40124","admin_listen":"127.0.0.1:40125",…,"message":"monolock started"}
//
// It writes that line (cmd/monolock, daemon.go, start; the names are
// package startline's) after every listener
// is bound and the event loop is started, so a connection made after it is
// accepted and served; "listen", "ops_listen" and
// "admin_listen" are the bound addresses (so port 0 works), the last two only
// when those ports are on. When the line names an ops port, the server is
// ready once its /readyz also answers 200, unless it runs in a network
// namespace this process cannot reach (Options.Netns) or is a node of a
// cluster led through etcd (its line names the cluster, and its /readyz
// answers 200 only while it leads). That is the whole contract: no
// test dials a port in a loop, sleeps, or reads any other line to learn that
// a server is up. The bench harness's floor server follows it too, with its
// own message.
//
// A helper process that is not a server but speaks in lines (a harness's
// client process, a conformance driver) is a Child: StartChild, then Next
// and Await read its lines with a deadline per line.
package proc

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/monolock/monolock/internal/startline"
)

// StartedMessage is the "message" of monolock's start line.
const StartedMessage = startline.Message

// Start line field names, as the server writes them (package startline).
const (
	FieldListen      = startline.Listen
	FieldOpsListen   = startline.OpsListen
	FieldAdminListen = startline.AdminListen
)

// Options say how to run a process.
type Options struct {
	// Name names the process in errors; the binary's base name when empty.
	Name string
	// Args are the program's arguments. Monolock puts its own in front.
	Args []string
	// Env is added to the environment.
	Env []string
	// Credential runs the process as another user (peers run as theirs).
	Credential *syscall.Credential
	// Netns runs the process inside that network namespace (ip netns exec;
	// needs root). Its ops port is then out of this process's reach, so
	// readiness is the start line alone.
	Netns string
	// LogFile, when set, receives a copy of the process's output.
	LogFile string
	// StartLine is the "message" of the JSON line on stderr that says the
	// process is ready; its "listen" must name an address. Empty: the
	// process is taken as started at once (the caller probes it), and its
	// stdout and stderr go straight to LogFile.
	StartLine string
	// StartTimeout bounds the wait for readiness; 30s when zero.
	StartTimeout time.Duration
	// StopSignal asks the process group to stop; SIGTERM when zero.
	StopSignal syscall.Signal
	// StopGrace is how long Stop waits before it kills the group; 10s when
	// zero.
	StopGrace time.Duration
	// Group, when set, holds the process until it is stopped, so that its
	// owner can stop it with the group's others (Group.StopAll). Without
	// one, only the caller's Stop or Kill ends it.
	Group *Group
}

// Process is a running child process.
type Process struct {
	Cmd *exec.Cmd
	// SpawnedAt is taken just before the process is started.
	SpawnedAt time.Time
	// Started is the start line, every field (nil without a start line).
	Started map[string]any
	// Addr, OpsAddr and AdminAddr are the bound addresses the start line
	// names; OpsAddr and AdminAddr are empty when those ports are off.
	Addr, OpsAddr, AdminAddr string
	// Version is the start line's "version", if any.
	Version string

	name string
	opts Options
	logs chan map[string]any
	done chan struct{}
	err  error     // Wait's result, valid after done
	exit time.Time // valid after done

	mu     sync.Mutex
	tail   []string // the last lines of output, for error messages
	notLog []string // stderr lines that are not JSON
}

// tailLines is how many lines of output Tail keeps.
const tailLines = 20

// logBuffer is how many JSON lines after the start line Logs holds before
// it drops new ones.
const logBuffer = 1024

// Start runs bin with o and waits until it is ready (see the package
// comment). The process has a process group of its own and is killed if
// this process dies.
func Start(bin string, o Options) (*Process, error) {
	if o.StartTimeout <= 0 {
		o.StartTimeout = 30 * time.Second
	}
	if o.StopSignal == 0 {
		o.StopSignal = syscall.SIGTERM
	}
	if o.StopGrace <= 0 {
		o.StopGrace = 10 * time.Second
	}
	name := o.Name
	if name == "" {
		name = filepath.Base(bin)
	}
	argv := append(netnsWrap(o.Netns), bin)
	cmd := exec.Command(argv[0], append(argv[1:], o.Args...)...)
	cmd.Env = append(os.Environ(), o.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: o.Credential}
	var logf *os.File // the child's output without a start line, else the copier's
	if o.LogFile != "" {
		if err := os.MkdirAll(filepath.Dir(o.LogFile), 0o755); err != nil {
			return nil, err
		}
		f, err := os.Create(o.LogFile)
		if err != nil {
			return nil, err
		}
		logf = f
	}
	closeLog := func() {
		if logf != nil {
			_ = logf.Close()
		}
	}
	p := &Process{Cmd: cmd, name: name, opts: o, logs: make(chan map[string]any, logBuffer), done: make(chan struct{})}
	var stderr io.ReadCloser
	if o.StartLine == "" {
		if logf != nil {
			cmd.Stdout, cmd.Stderr = logf, logf
		}
	} else {
		var err error
		if stderr, err = cmd.StderrPipe(); err != nil {
			closeLog()
			return nil, err
		}
	}
	p.SpawnedAt = time.Now().Round(0)
	if err := cmd.Start(); err != nil {
		closeLog()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	if o.Group != nil {
		o.Group.add(p)
	}
	if stderr == nil {
		closeLog() // the child has its own copy
		go p.wait(nil)
		return p, nil
	}
	started := make(chan map[string]any, 1)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		p.scan(stderr, logf, started)
	}()
	go p.wait(scanned)
	select {
	case line := <-started:
		p.Started = line
		p.Addr, _ = line[FieldListen].(string)
		p.OpsAddr, _ = line[FieldOpsListen].(string)
		p.AdminAddr, _ = line[FieldAdminListen].(string)
		p.Version, _ = line[startline.Version].(string)
	case <-p.done:
		p.forget()
		return nil, fmt.Errorf("%s exited before it was ready (%v): %s", name, p.err, p.Tail())
	case <-time.After(o.StartTimeout):
		p.Kill()
		return nil, fmt.Errorf("%s wrote no %q line within %v: %s", name, o.StartLine, o.StartTimeout, p.Tail())
	}
	// A node of a cluster led through etcd (its start line names the
	// cluster) is ready at its start line: its /readyz answers 503 until it
	// leads, which its log says (eventloop.HAServingMessage).
	_, node := p.Started[startline.HACluster]
	if p.OpsAddr != "" && o.Netns == "" && !node {
		if err := p.awaitReady(time.Now().Add(o.StartTimeout)); err != nil {
			p.Kill()
			return nil, err
		}
	}
	return p, nil
}

// scan reads the process's stderr to its end: it copies every line to w,
// keeps the tail, hands the start line to started and every later JSON line
// to Logs.
func (p *Process) scan(r io.Reader, w *os.File, started chan<- map[string]any) {
	if w != nil {
		defer func() { _ = w.Close() }()
	}
	defer close(p.logs)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	found := false
	for sc.Scan() {
		text := sc.Text()
		if w != nil {
			_, _ = fmt.Fprintln(w, text)
		}
		var line map[string]any
		err := json.Unmarshal(sc.Bytes(), &line)
		p.mu.Lock()
		p.tail = append(p.tail, text)
		if len(p.tail) > tailLines {
			p.tail = p.tail[1:]
		}
		if err != nil {
			p.notLog = append(p.notLog, text)
		}
		p.mu.Unlock()
		switch {
		case err != nil:
		case !found && line["message"] == p.opts.StartLine && line[FieldListen] != nil:
			found = true
			started <- line
		default:
			select {
			case p.logs <- line:
			default:
			}
		}
	}
}

// wait reaps the process once its output is read to the end (Wait closes
// the pipe).
func (p *Process) wait(scanned <-chan struct{}) {
	if scanned != nil {
		<-scanned
	}
	p.err = p.Cmd.Wait()
	p.exit = time.Now().Round(0)
	p.forget()
	close(p.done)
}

// awaitReady polls /readyz on the ops port until it answers 200. The
// client keeps no connection open: an idle keep-alive connection would count
// against the server's HTTP connection cap.
func (p *Process) awaitReady(deadline time.Time) error {
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	defer hc.CloseIdleConnections()
	url := "http://" + p.OpsAddr + "/readyz"
	var last string
	for {
		resp, err := hc.Get(url)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%d %q", resp.StatusCode, strings.TrimSpace(string(body)))
		} else {
			last = err.Error()
		}
		if !p.Alive() {
			return fmt.Errorf("%s exited before %s answered 200 (%v): %s", p.name, url, p.err, p.Tail())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %s did not answer 200 in time, last %s", p.name, url, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Pid is the process's id (and that of its process group).
func (p *Process) Pid() int { return p.Cmd.Process.Pid }

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error { return p.Cmd.Process.Signal(sig) }

// Done is closed when the process has exited (and its output is read).
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is the exit as exec.Cmd.Wait reports it (nil for status 0); valid
// once Done is closed.
func (p *Process) Err() error { return p.err }

// ExitedAt is when the exit was seen; valid once Done is closed.
func (p *Process) ExitedAt() time.Time { return p.exit }

// Alive reports whether the process is still running.
func (p *Process) Alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// WaitExit waits up to timeout for the exit; false when it did not come.
func (p *Process) WaitExit(timeout time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// ErrKilled is Stop's answer when the process outlived its grace.
var ErrKilled = errors.New("killed")

// Stop sends the stop signal (SIGTERM unless Options said otherwise) to the
// process group, waits up to the grace and kills the group after it. It
// returns Wait's result, or an error wrapping ErrKilled. A nil p is
// stopped already.
func (p *Process) Stop() error {
	if p == nil {
		return nil
	}
	defer p.forget()
	if !p.Alive() {
		return p.err
	}
	_ = syscall.Kill(-p.Pid(), p.opts.StopSignal)
	if p.WaitExit(p.opts.StopGrace) {
		return p.err
	}
	p.Kill()
	return fmt.Errorf("%s did not exit within %v of %v: %w", p.name, p.opts.StopGrace, p.opts.StopSignal, ErrKilled)
}

// Kill ends the process group at once and waits for the exit. A nil p is
// ended already.
func (p *Process) Kill() {
	if p == nil {
		return
	}
	defer p.forget()
	if !p.Alive() {
		return
	}
	_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
	<-p.done
}

func (p *Process) forget() {
	if p.opts.Group != nil {
		p.opts.Group.remove(p)
	}
}

// Tail is the last lines of output, joined with " | ".
func (p *Process) Tail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.tail, " | ")
}

// NotJSON is every stderr line that was not a JSON object (a panic, a race
// report); empty for a process without a start line.
func (p *Process) NotJSON() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.notLog...)
}

// Logs delivers every JSON line after the start line, in order, and is
// closed when the output ends. It holds up to 1024 lines that nobody has
// taken; later ones are dropped.
func (p *Process) Logs() <-chan map[string]any { return p.logs }

// WaitLog takes lines from Logs until one whose message contains substr.
func (p *Process) WaitLog(substr string, timeout time.Duration) (map[string]any, error) {
	deadline := time.After(timeout)
	for {
		select {
		case line, ok := <-p.logs:
			if !ok {
				return nil, fmt.Errorf("%s exited before logging %q", p.name, substr)
			}
			if msg, _ := line["message"].(string); strings.Contains(msg, substr) {
				return line, nil
			}
		case <-deadline:
			return nil, fmt.Errorf("%s logged no line containing %q within %v", p.name, substr, timeout)
		}
	}
}

// netnsWrap is the command that runs another inside network namespace ns
// (none for "").
func netnsWrap(ns string) []string {
	if ns == "" {
		return nil
	}
	return []string{"ip", "netns", "exec", ns}
}

// --- monolock ---

// Monolock starts a monolock binary: o.Args follow
// "-listen 127.0.0.1:0 -log-format json" (a later -listen wins), and the
// start line is StartedMessage.
func Monolock(bin string, o Options) (*Process, error) {
	o.Args = append([]string{"-listen", "127.0.0.1:0", "-log-format", "json"}, o.Args...)
	o.StartLine = StartedMessage
	return Start(bin, o)
}

// MonolockT is Monolock for a test: a failure ends it; when it ends the
// process is killed, and any stderr line that was not JSON fails it.
func MonolockT(t testing.TB, bin string, args ...string) *Process {
	t.Helper()
	p, err := Monolock(bin, Options{Args: args})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		for _, line := range p.NotJSON() {
			t.Errorf("stderr line is not JSON: %q", line)
		}
	})
	return p
}

// MustWaitLog is WaitLog for a test, with a 30 s safety deadline.
func (p *Process) MustWaitLog(t testing.TB, substr string) map[string]any {
	t.Helper()
	line, err := p.WaitLog(substr, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return line
}
