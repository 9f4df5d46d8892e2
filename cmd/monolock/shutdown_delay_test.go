package main

import (
	"errors"
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/monolock/monolock/internal/testsupport/wire"
	"github.com/monolock/monolock/protocol"
)

// TestShutdownDelay: on SIGTERM /readyz answers 503 at once while the
// protocol port still admits and serves new clients; when the delay ends
// (here: a second SIGTERM, so that nothing depends on timing) every session
// gets ERROR 0x01 and the process exits 0.
func TestShutdownDelay(t *testing.T) {
	p := startServer(t, "-ops-listen", "127.0.0.1:0", "-shutdown-delay", "1h")
	holder := wire.MustDial(t, p.Addr, wire.Options{})
	holder.SendAcquire("job", testLease)
	if f, err := holder.ReadErr(10 * time.Second); err != nil || f.Type != protocol.TypeAcquired {
		t.Fatalf("holder: %+v, %v", f, err)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.MustWaitLog(t, "serving on for the shutdown delay")
	if code, _ := get(t, "http://"+p.OpsAddr+"/readyz"); code != 503 {
		t.Fatalf("/readyz during the shutdown delay: %d, want 503", code)
	}

	// A client that arrives now is admitted and served: a grant on a free
	// lock, a place in the queue of a held one.
	late := wire.MustDial(t, p.Addr, wire.Options{})
	late.SendAcquire("other", testLease)
	if f, err := late.ReadErr(10 * time.Second); err != nil || f.Type != protocol.TypeAcquired {
		t.Fatalf("new client during the delay: %+v, %v; want ACQUIRED", f, err)
	}
	waiter := wire.MustDial(t, p.Addr, wire.Options{})
	waiter.SendAcquire("job", testLease)
	if f, err := waiter.ReadErr(10 * time.Second); err != nil || f.Type != protocol.TypeWaiting {
		t.Fatalf("new waiter during the delay: %+v, %v; want WAITING", f, err)
	}

	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for i, c := range []*wire.Conn{holder, late, waiter} {
		f, err := c.ReadErr(10 * time.Second)
		if err != nil || f.Type != protocol.TypeError || f.Code != protocol.CodeShuttingDown {
			t.Fatalf("session %d: got %+v, %v; want ERROR 0x01", i, f, err)
		}
		if _, err := c.ReadErr(10 * time.Second); !errors.Is(err, io.EOF) {
			t.Fatalf("session %d: want EOF after ERROR, got %v", i, err)
		}
	}
	if !p.WaitExit(30 * time.Second) {
		t.Fatal("server did not exit after the shutdown delay ended")
	}
	if err := p.Err(); err != nil {
		t.Fatalf("exit: %v; want status 0", err)
	}
}

// TestShutdownDelayEnds: without a second signal, the delay ends by itself
// and the sessions get ERROR 0x01 (only the order is checked, not the time).
func TestShutdownDelayEnds(t *testing.T) {
	p := startServer(t, "-shutdown-delay", "100ms")
	holder := wire.MustDial(t, p.Addr, wire.Options{})
	holder.SendAcquire("job", testLease)
	if f, err := holder.ReadErr(10 * time.Second); err != nil || f.Type != protocol.TypeAcquired {
		t.Fatalf("holder: %+v, %v", f, err)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.MustWaitLog(t, "serving on for the shutdown delay")
	p.MustWaitLog(t, "shutdown delay over")
	if f, err := holder.ReadErr(10 * time.Second); err != nil || f.Type != protocol.TypeError || f.Code != protocol.CodeShuttingDown {
		t.Fatalf("holder after the delay: %+v, %v; want ERROR 0x01", f, err)
	}
	if !p.WaitExit(30*time.Second) || p.Err() != nil {
		t.Fatalf("exit: %v; want status 0", p.Err())
	}
}
