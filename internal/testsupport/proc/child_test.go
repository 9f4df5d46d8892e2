package proc

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func shChild(t *testing.T, script string, o ChildOptions) *Child {
	t.Helper()
	o.Args = append([]string{"-c", script}, o.Args...)
	c, err := StartChild("/bin/sh", o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Kill)
	return c
}

// The child answers what it reads, line by line; Await skips the lines
// before the one it waits for; a closed stdin ends it.
func TestChildSpeaksInLines(t *testing.T) {
	c := shChild(t, `echo ready; while read l; do echo "got $l"; done; echo bye`, ChildOptions{})
	if l, err := c.Next(10 * time.Second); err != nil || l.Text != "ready" || l.At.IsZero() {
		t.Fatalf("Next = %+v, %v; want ready", l, err)
	}
	for _, s := range []string{"a", "b"} {
		if err := c.Send(s); err != nil {
			t.Fatal(err)
		}
	}
	if l, err := c.Await("got b", 10*time.Second); err != nil || l.Text != "got b" {
		t.Fatalf("Await = %+v, %v", l, err)
	}
	if err := c.Close(10 * time.Second); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if l, err := c.Next(0); err != nil || l.Text != "bye" {
		t.Fatalf("after the exit, Next = %+v, %v; want the last line, already read", l, err)
	}
	if _, err := c.Next(time.Second); err == nil || !strings.Contains(err.Error(), "exited without writing") {
		t.Fatalf("Next after the end: %v", err)
	}
}

// A stuck child: no line within the deadline is an error, and Close kills a
// child that ignores its closed stdin.
func TestChildStuck(t *testing.T) {
	c := shChild(t, `trap '' TERM; exec sleep 60`, ChildOptions{})
	if _, err := c.Next(20 * time.Millisecond); err == nil || !strings.Contains(err.Error(), "wrote no line within 20ms") {
		t.Fatalf("Next from a silent child: %v", err)
	}
	if _, err := c.Await("never", 20*time.Millisecond); err == nil || !strings.Contains(err.Error(), `waiting for "never"`) {
		t.Fatalf("Await from a silent child: %v", err)
	}
	if err := c.Close(50 * time.Millisecond); !errors.Is(err, ErrKilled) {
		t.Fatalf("Close of a child that does not exit: %v, want ErrKilled", err)
	}
}

// A dead child: the error says so and quotes its stderr.
func TestChildDiesEarly(t *testing.T) {
	c := shChild(t, `echo 'driver: no such lock' >&2; exit 3`, ChildOptions{})
	_, err := c.Next(10 * time.Second)
	if err == nil || !strings.Contains(err.Error(), "exited without writing the next line") {
		t.Fatalf("Next: %v", err)
	}
	<-c.Done()
	var exit *exec.ExitError
	if !errors.As(c.Err(), &exit) || exit.ExitCode() != 3 || !strings.Contains(c.Stderr(), "no such lock") {
		t.Fatalf("Err = %v, stderr %q", c.Err(), c.Stderr())
	}
}

// A child that writes far more than anyone reads, and a stopped one: Kill
// ends both and returns.
func TestKillAChildNobodyReads(t *testing.T) {
	loud := shChild(t, `yes`, ChildOptions{})
	stopped := shChild(t, `echo x; exec sleep 60`, ChildOptions{})
	if _, err := stopped.Next(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(stopped.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	loud.Kill()
	stopped.Kill()
	if loud.WaitExit(0) == false || stopped.WaitExit(0) == false {
		t.Fatal("Kill returned before the exit")
	}
}

// Wrap runs the binary under another command; Stdout sends the output to a
// file instead of Next.
func TestChildWrapAndStdout(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := shChild(t, `echo "$0 $X"`, ChildOptions{Wrap: []string{"env", "X=wrapped"}, Stdout: f, NoInput: true, Args: []string{"zero"}})
	if !c.WaitExit(10 * time.Second) {
		t.Fatal("no exit")
	}
	if b, _ := os.ReadFile(out); string(b) != "zero wrapped\n" {
		t.Fatalf("output %q", b)
	}
	if _, err := c.Next(time.Second); err == nil {
		t.Fatal("Next read a line of a child whose stdout goes to a file")
	}
}
