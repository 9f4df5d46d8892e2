package opshttp

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/monolock/monolock/internal/fdgate"
	"github.com/monolock/monolock/internal/testsupport/proc"
)

// spareChildEnv makes the test binary play the server of
// TestProbeAtDescriptorLimit.
const spareChildEnv = "OPSHTTP_SPARE_CHILD"

// TestProbeAtDescriptorLimit: a process that has no descriptor left still
// answers its probes, one after another, through the listener's spare. The
// server runs in a child process, which takes every descriptor it may have
// itself; without the spare, accept fails for good and no request is
// answered.
func TestProbeAtDescriptorLimit(t *testing.T) {
	if os.Getenv(spareChildEnv) != "" {
		serveWithoutDescriptors()
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	child, err := proc.StartChild(exe, proc.ChildOptions{
		Name: "the descriptor-starved server", Args: []string{"-test.run=^TestProbeAtDescriptorLimit$"},
		Env: []string{spareChildEnv + "=1"}, Stderr: os.Stderr,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := child.Close(safety); err != nil { // the child exits when its stdin closes
			t.Errorf("child: %v", err)
		}
	})
	// The test framework may print lines of its own before.
	full, err := child.Await("full ", safety)
	if err != nil {
		t.Fatalf("the child did not report its address after taking every descriptor: %v", err)
	}
	addr := strings.TrimPrefix(full.Text, "full ")

	hc := &http.Client{Timeout: safety, Transport: &http.Transport{DisableKeepAlives: true}}
	for i := range 5 { // each one takes the spare, and hands it back when its connection closes
		resp, err := hc.Get("http://" + addr + "/readyz")
		if err != nil {
			t.Fatalf("probe %d at the descriptor limit: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(body) != "ok" {
			t.Fatalf("probe %d: %s %q, want 200 ok", i, resp.Status, body)
		}
	}
}

// serveWithoutDescriptors serves "ok" behind a LimitListener, lowers its
// descriptor limit and takes every descriptor left, reports "full ADDR",
// and serves until its stdin closes.
func serveWithoutDescriptors() {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(2)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail(err)
	}
	hs := NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}), DefaultLimits(1024), zerolog.Nop())
	ln := LimitListener(hs, inner, 4, nil)
	go func() { _ = hs.Serve(ln) }()

	open, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		fail(err)
	}
	limit := uint64(len(open) + 16)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: limit, Max: limit}); err != nil {
		fail(fmt.Errorf("lower the descriptor limit: %w", err))
	}
	var held []int
	for {
		fd, err := unix.Dup(0)
		if err != nil {
			if !outOfDescriptors(err) {
				fail(err)
			}
			break
		}
		held = append(held, fd)
	}
	fmt.Printf("full %s\n", inner.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	for _, fd := range held {
		_ = unix.Close(fd)
	}
}

// emfileListener fails every Accept for want of descriptors, as a listener
// does at the process's limit whether or not a connection waits, and says
// on calls when it was asked.
type emfileListener struct {
	net.Listener
	calls chan struct{}
}

func (l emfileListener) Accept() (net.Conn, error) {
	l.calls <- struct{}{}
	return nil, unix.EMFILE
}

// TestListenerWantsDescriptorOnlyForWaitingConnection: at the descriptor
// limit without a spare, an HTTP listener asks the lock port for a
// descriptor while a connection waits in its queue, and withdraws when none
// does. Before, an idle listener at the limit asked too and kept asking:
// the lock port then gave it a descriptor at each of its evictions and
// waited out the yield's timeout, serving newcomers at a few dozen a second
// (attack 18 of the adversarial harness: honest clients past 5 s).
func TestListenerWantsDescriptorOnlyForWaitingConnection(t *testing.T) {
	fake := emfileListener{calls: make(chan struct{})}
	gate := fdgate.New()
	var waiting atomic.Bool
	l := &limitListener{
		Listener: fake, done: make(chan struct{}), spare: &spareDescriptor{source: -1, fd: -1},
		gate: gate, pending: waiting.Load,
	}
	result := make(chan error, 1)
	go func() {
		_, err := l.accept()
		result <- err
	}()
	// Each Accept follows the decision the previous failure led to.
	accepts := func(n int) {
		t.Helper()
		for range n {
			select {
			case <-fake.calls:
			case <-time.After(safety):
				t.Fatal("the listener stopped retrying its accept at the limit")
			}
		}
	}
	for _, step := range []struct {
		waiting bool
		what    string
	}{
		{false, "an idle listener at the limit"},
		{true, "a listener with a connection waiting"},
		{false, "a listener whose waiting connection went"},
	} {
		waiting.Store(step.waiting)
		accepts(3)
		if got := gate.Wanted(); got != step.waiting {
			t.Fatalf("%s: the gate says wanted=%v, want %v", step.what, got, step.waiting)
		}
	}
	close(l.done)
	for {
		select {
		case <-fake.calls: // the accept in flight, if any
		case err := <-result:
			if !errors.Is(err, net.ErrClosed) {
				t.Fatalf("accept after Close: %v, want net.ErrClosed", err)
			}
			return
		case <-time.After(safety):
			t.Fatal("accept did not return after Close")
		}
	}
}
