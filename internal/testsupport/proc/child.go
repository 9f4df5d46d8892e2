package proc

import (
	"bufio"
	"bytes"
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

// A Child is a helper process that speaks in lines: a client process of a
// harness, a conformance driver. It reads lines on stdin (Send, CloseInput)
// and writes one line per event on stdout, which Next and Await read with a
// deadline per line. Unlike Start, it waits for no start line: the first
// line it writes is its own business. A child whose stdout is not a line
// stream (ChildOptions.Stdout set) still gets the process handling: its own
// process group, a bounded stop, Done.

// ChildOptions say how to run a Child.
type ChildOptions struct {
	// Name names the child in errors; the binary's base name when empty.
	Name string
	// Args are the program's arguments.
	Args []string
	// Env is added to the environment.
	Env []string
	// Wrap is a command the child runs under, in front of the binary.
	Wrap []string
	// Netns runs the child inside that network namespace (ip netns exec,
	// after Wrap; needs root).
	Netns string
	// Stdout, when set, receives stdout instead of Next; Stderr, when set,
	// receives stderr (else its first 64 KiB are kept for Stderr()).
	Stdout, Stderr io.Writer
	// NoInput gives the child no stdin pipe (it reads /dev/null).
	NoInput bool
}

// Line is one line the child wrote, with the time it was read.
type Line struct {
	Text string
	At   time.Time
}

// stderrKept is how much of a child's stderr is kept for Stderr().
const stderrKept = 64 << 10

// lineBuffer is how many lines the child may write ahead of Next; beyond
// it the child blocks on its stdout, as it would on a slow terminal.
const lineBuffer = 256

// Child is a running child process.
type Child struct {
	Cmd  *exec.Cmd
	name string

	stdin io.WriteCloser
	lines chan Line
	quit  chan struct{} // closed by Kill: nobody reads lines any more
	stop  sync.Once
	done  chan struct{}
	err   error

	mu     sync.Mutex
	stderr bytes.Buffer
}

// StartChild starts bin with o, in a process group of its own that is
// killed if this process dies.
func StartChild(bin string, o ChildOptions) (*Child, error) {
	name := o.Name
	if name == "" {
		name = filepath.Base(bin)
	}
	argv := append(append(append(append([]string(nil), o.Wrap...), netnsWrap(o.Netns)...), bin), o.Args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), o.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	c := &Child{Cmd: cmd, name: name, lines: make(chan Line, lineBuffer), quit: make(chan struct{}), done: make(chan struct{})}
	cmd.Stderr = o.Stderr
	if o.Stderr == nil {
		cmd.Stderr = (*keptStderr)(c)
	}
	var err error
	if !o.NoInput {
		if c.stdin, err = cmd.StdinPipe(); err != nil {
			return nil, err
		}
	}
	var stdout io.Reader
	if o.Stdout != nil {
		cmd.Stdout = o.Stdout
		close(c.lines)
	} else if stdout, err = cmd.StdoutPipe(); err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s (%s): %w", name, strings.Join(argv, " "), err)
	}
	go c.read(stdout)
	return c, nil
}

// keptStderr keeps the first stderrKept bytes of the child's stderr.
type keptStderr Child

func (k *keptStderr) Write(b []byte) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if room := stderrKept - k.stderr.Len(); room > 0 {
		k.stderr.Write(b[:min(len(b), room)])
	}
	return len(b), nil
}

// read hands stdout's lines to Next until the end, then reaps the child.
func (c *Child) read(stdout io.Reader) {
	if stdout != nil {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			select {
			case c.lines <- Line{Text: sc.Text(), At: time.Now()}:
			case <-c.quit: // read on to the end so that the child never blocks
			}
		}
		close(c.lines)
	}
	c.err = c.Cmd.Wait()
	close(c.done)
}

// Pid is the child's process id (and that of its process group).
func (c *Child) Pid() int { return c.Cmd.Process.Pid }

// Send writes line and a newline to the child's stdin.
func (c *Child) Send(line string) error {
	if _, err := io.WriteString(c.stdin, line+"\n"); err != nil {
		return fmt.Errorf("%s: write to its stdin: %w", c.name, err)
	}
	return nil
}

// CloseInput closes the child's stdin: for most children, the sign to end.
func (c *Child) CloseInput() error {
	if c.stdin == nil {
		return nil
	}
	return c.stdin.Close()
}

// Next returns the next line, or an error when none came within timeout or
// the child's stdout ended. A line already read is returned even with a
// zero timeout.
func (c *Child) Next(timeout time.Duration) (Line, error) {
	select {
	case l, ok := <-c.lines:
		return c.got(l, ok)
	default:
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case l, ok := <-c.lines:
		return c.got(l, ok)
	case <-t.C:
		return Line{}, fmt.Errorf("%s wrote no line within %v", c.name, timeout)
	}
}

func (c *Child) got(l Line, ok bool) (Line, error) {
	if !ok {
		return Line{}, fmt.Errorf("%s exited without writing the next line%s", c.name, c.stderrNote())
	}
	return l, nil
}

// Await reads lines until one that starts with prefix, each within timeout
// of the one before (a child that goes on talking but never says it is
// still stuck only as long as it talks: give the whole wait a bound with
// the timeout of the caller's choosing).
func (c *Child) Await(prefix string, timeout time.Duration) (Line, error) {
	deadline := time.Now().Add(timeout)
	for {
		l, err := c.Next(max(time.Until(deadline), 0))
		if err != nil {
			return l, fmt.Errorf("waiting for %q: %w", prefix, err)
		}
		if strings.HasPrefix(l.Text, prefix) {
			return l, nil
		}
	}
}

// Lines delivers the lines in order, for a reader that takes them as they
// come (instead of Next); closed when stdout ends.
func (c *Child) Lines() <-chan Line { return c.lines }

// Done is closed when the child has exited and its output is read.
func (c *Child) Done() <-chan struct{} { return c.done }

// Err is the exit as exec.Cmd.Wait reports it; valid once Done is closed.
func (c *Child) Err() error { return c.err }

// WaitExit waits up to timeout for the exit; false when it did not come.
func (c *Child) WaitExit(timeout time.Duration) bool {
	select {
	case <-c.done: // an exit already seen wins over a zero timeout
		return true
	default:
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-c.done:
		return true
	case <-t.C:
		return false
	}
}

// Close closes stdin, waits up to grace for the exit and kills the process
// group after it. It returns the exit, or an error saying it was killed.
func (c *Child) Close(grace time.Duration) error {
	_ = c.CloseInput()
	if c.WaitExit(grace) {
		return c.err
	}
	c.Kill()
	return fmt.Errorf("%s did not exit within %v of its stdin closing: %w", c.name, grace, ErrKilled)
}

// Kill ends the child's process group at once (a stopped one too) and
// waits for the exit; lines not read yet are dropped.
func (c *Child) Kill() {
	c.stop.Do(func() { close(c.quit) })
	select {
	case <-c.done:
		return
	default:
	}
	_ = syscall.Kill(-c.Pid(), syscall.SIGKILL)
	_ = syscall.Kill(-c.Pid(), syscall.SIGCONT)
	<-c.done
}

// Stderr is what the child wrote to stderr (its first 64 KiB), when
// ChildOptions.Stderr did not take it.
func (c *Child) Stderr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stderr.String()
}

func (c *Child) stderrNote() string {
	if s := strings.TrimSpace(c.Stderr()); s != "" {
		return "; its stderr: " + s
	}
	return ""
}
