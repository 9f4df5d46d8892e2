package eventloop

import (
	"bytes"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
)

// TestAcceptErrorsAreReportedOncePerInterval: at the descriptor limit runs
// of failed accepts start and end many times a second; the log reports a
// failure at most once per acceptErrorLogEvery, with the count since the
// last report, and the recovery only after a run it reported.
func TestAcceptErrorsAreReportedOncePerInterval(t *testing.T) {
	var buf bytes.Buffer
	log := zerolog.New(&buf)
	var l acceptErrorLog
	start := time.Unix(1_000_000, 0)
	emfile := errors.Join(errors.New("accept"), unix.EMFILE)

	lines := func() []string {
		out := strings.Split(strings.TrimSpace(buf.String()), "\n")
		buf.Reset()
		if len(out) == 1 && out[0] == "" {
			return nil
		}
		return out
	}

	l.failed(log, emfile, start) // the first failure is reported at once
	l.recovered(log)
	got := lines()
	if len(got) != 2 || !strings.Contains(got[0], `"errors":1`) || !strings.Contains(got[1], "accepting connections again") {
		t.Fatalf("first run: got %q, want the failure and the recovery", got)
	}

	// 100 runs within the interval: nothing is logged
	for i := range 100 {
		now := start.Add(time.Duration(i+1) * (acceptErrorLogEvery - time.Nanosecond) / 100)
		l.failed(log, emfile, now)
		l.failed(log, emfile, now)
		l.recovered(log)
	}
	if got := lines(); got != nil {
		t.Fatalf("within %v of a report: got %q, want nothing", acceptErrorLogEvery, got)
	}

	// at the interval: one report, counting the 200 failures in between
	l.failed(log, emfile, start.Add(acceptErrorLogEvery))
	if got := lines(); len(got) != 1 || !strings.Contains(got[0], `"errors":201`) || !strings.Contains(got[0], "EMFILE") && !strings.Contains(got[0], "too many open files") {
		t.Fatalf("at the interval: got %q, want one report of 201 errors", got)
	}
	l.failed(log, emfile, start.Add(acceptErrorLogEvery+time.Millisecond))
	l.recovered(log)
	if got := lines(); len(got) != 1 || !strings.Contains(got[0], `"errors":2`) || !strings.Contains(got[0], "accepting connections again") {
		t.Fatalf("recovery: got %q, want one line with the run's 2 errors", got)
	}
	l.recovered(log) // an accept that follows no failure logs nothing
	if got := lines(); got != nil {
		t.Fatalf("accept after a recovery: got %q, want nothing", got)
	}
}

// At the door a tie between two newcomers from one source keeps the one
// that has sent something: sentSomething looks at what waits unread in the
// kernel, without reading it.
func TestSentSomething(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	if sentSomething(server) {
		t.Fatal("a client that has sent nothing has sent something")
	}
	if _, err := client.Write([]byte{0x16}); err != nil {
		t.Fatal(err)
	}
	// Wait until the socket is readable, without reading: the poller
	// calls back once the byte has arrived.
	raw, err := server.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	if err := server.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := raw.Read(func(uintptr) bool { return sentSomething(server) }); err != nil {
		t.Fatalf("a client that has sent a byte has sent nothing: %v", err)
	}
	if sentSomething(&net.TCPConn{}) {
		t.Fatal("a connection without a descriptor has sent something")
	}
}

// The door leaves one source's backlog in order only while it is short:
// crowded reads the listener's accept queue from the kernel.
func TestCrowdedBacklog(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s := &Server{ln: ln}
	dial := func(n int) {
		for range n {
			c, err := net.Dial("tcp", ln.Addr().String()) // queued by the kernel once connected
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
		}
	}
	dial(crowdBacklog - 1)
	if s.crowded() {
		t.Fatalf("%d queued connections are a crowd", crowdBacklog-1)
	}
	dial(1)
	if !s.crowded() {
		t.Fatalf("%d queued connections are not a crowd", crowdBacklog)
	}
}
