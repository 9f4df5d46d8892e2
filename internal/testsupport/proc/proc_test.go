package proc

import (
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"
)

// sh starts a shell script as the process, with start line message msg.
func sh(t *testing.T, script, msg string) (*Process, error) {
	t.Helper()
	p, err := Start("/bin/sh", Options{Args: []string{"-c", script}, StartLine: msg, StartTimeout: 5 * time.Second, StopGrace: 5 * time.Second})
	if p != nil {
		t.Cleanup(p.Kill)
	}
	return p, err
}

func TestStartLineAndLogs(t *testing.T) {
	p, err := sh(t, `echo '{"message":"early"}'
echo 'not json'
echo '{"message":"monolock started","version":"v1","listen":"127.0.0.1:1","admin_listen":"127.0.0.1:2"}' >&2
echo '{"message":"after","n":1}' >&2
exec sleep 30`, StartedMessage)
	if err != nil {
		t.Fatal(err)
	}
	if p.Addr != "127.0.0.1:1" || p.AdminAddr != "127.0.0.1:2" || p.OpsAddr != "" || p.Version != "v1" || p.Started["message"] != StartedMessage {
		t.Fatalf("start line read as %q %q %q %q %v", p.Addr, p.AdminAddr, p.OpsAddr, p.Version, p.Started)
	}
	line := p.MustWaitLog(t, "after")
	if line["n"] != 1.0 {
		t.Errorf("log line %v", line)
	}
	if err := p.Stop(); err == nil || errors.Is(err, ErrKilled) {
		t.Errorf("Stop: %v, want the SIGTERM exit status", err)
	}
	if p.Alive() || !strings.Contains(p.Tail(), "after") {
		t.Errorf("alive %v, tail %q", p.Alive(), p.Tail())
	}
}

func TestNotJSONLinesAreKept(t *testing.T) {
	p, err := sh(t, `echo 'WARNING: DATA RACE' >&2; echo '{"message":"monolock started","listen":"x"}' >&2; exec sleep 30`, StartedMessage)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.NotJSON(); len(got) != 1 || got[0] != "WARNING: DATA RACE" {
		t.Errorf("NotJSON = %q", got)
	}
}

func TestExitBeforeReady(t *testing.T) {
	_, err := sh(t, `echo 'monolock: -listen: bad' >&2; exit 2`, StartedMessage)
	if err == nil || !strings.Contains(err.Error(), "exited before it was ready") || !strings.Contains(err.Error(), "-listen: bad") {
		t.Fatalf("err = %v", err)
	}
}

func TestNoStartLine(t *testing.T) {
	_, err := Start("/bin/sh", Options{Args: []string{"-c", "exec sleep 30"}, StartLine: StartedMessage, StartTimeout: 200 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "wrote no") {
		t.Fatalf("err = %v", err)
	}
}

func TestStopKillsAfterTheGrace(t *testing.T) {
	// The start line comes after the trap, so once Start returns SIGTERM is
	// ignored (and stays ignored across exec).
	p, err := Start("/bin/sh", Options{
		Args:      []string{"-c", `trap '' TERM; echo '{"message":"monolock started","listen":"x"}' >&2; exec sleep 30`},
		StartLine: StartedMessage,
		StopGrace: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(); !errors.Is(err, ErrKilled) {
		t.Fatalf("Stop: %v, want ErrKilled", err)
	}
	if err := syscall.Kill(-p.Pid(), 0); err == nil {
		t.Error("the process group survived")
	}
}
