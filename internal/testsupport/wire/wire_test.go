package wire_test

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/monolock/monolock/internal/testsupport/wire"
	"github.com/monolock/monolock/protocol"
)

// scripted runs a one-connection server that reads n bytes and writes
// answer, then closes.
func scripted(t *testing.T, n int, answer []byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if _, err := io.ReadFull(c, make([]byte, n)); err != nil {
			return
		}
		_, _ = c.Write(answer)
	}()
	return ln.Addr().String()
}

func TestExchange(t *testing.T) {
	acq := wire.Acquire("job", 1000)
	answer := protocol.AppendWaiting(nil)
	answer = protocol.AppendAcquired(answer, 7)
	answer = protocol.AppendError(answer, protocol.CodeShuttingDown, protocol.CodeShuttingDown.String())
	c := wire.MustDial(t, scripted(t, len(acq)+1, answer), wire.Options{Label: "client", Safety: 5 * time.Second})
	c.Send(acq)
	c.SendHeartbeat()
	c.ExpectWaiting()
	c.ExpectToken(7)
	if reason := c.ExpectErrorThenEOF(protocol.CodeShuttingDown); reason != protocol.CodeShuttingDown.String() {
		t.Errorf("reason %q", reason)
	}
}

func TestErrMethods(t *testing.T) {
	c, err := wire.Dial(scripted(t, 1, protocol.AppendAcquired(nil, 3)), wire.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.NC.Close()
	if err := c.SendErr(wire.Heartbeat); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ExpectErr(protocol.TypeWaiting); err == nil || !strings.Contains(err.Error(), "got ACQUIRED(3), want WAITING") {
		t.Errorf("ExpectErr: %v", err)
	}
	if err := c.EOFErr(); err != nil {
		t.Errorf("EOFErr: %v", err)
	}
}

func TestUnboundFatalPanics(t *testing.T) {
	c, err := wire.Dial(scripted(t, 0, nil), wire.Options{Label: "loose"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.NC.Close()
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "loose: ") {
			t.Errorf("recovered %v, want a panic naming the connection", r)
		}
	}()
	c.ExpectAcquired() // EOF: no frame
}

func TestCheckReason(t *testing.T) {
	for _, c := range []struct {
		f  wire.Frame
		ok bool
	}{
		{wire.Frame{Type: protocol.TypeError, Code: protocol.CodeShuttingDown}, true},
		{wire.Frame{Type: protocol.TypeError, Code: protocol.CodeShuttingDown, Reason: protocol.CodeShuttingDown.String() + ": detail"}, true},
		{wire.Frame{Type: protocol.TypeError, Code: protocol.CodeShuttingDown, Reason: "other"}, false},
		{wire.Frame{Type: protocol.TypeError, Code: protocol.CodeShuttingDown, Reason: "\xff"}, false},
	} {
		if err := wire.CheckReason(c.f); (err == nil) != c.ok {
			t.Errorf("%v: %v", c.f, err)
		}
	}
}
