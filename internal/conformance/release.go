package conformance

import (
	"time"

	"github.com/monolock/monolock/internal/tcpstate"
)

// The release (docs/protocol.md, "Connection behaviour"): RELEASE (0x03),
// after which the server closes first, so that the connection's TIME_WAIT
// entry is on the server and the client host keeps no ephemeral port for
// it. The kit checks on the wire and in the kernel's socket table.
func releaseScenarios() []Scenario {
	return []Scenario{
		{Name: "release-server-closes-first", Rule: "release: RELEASE (0x03) before any end of stream; the server closes first, the client second, and its port keeps no TIME_WAIT entry", run: releaseServerClosesFirst},
		{Name: "release-old-server", Rule: "release: ERROR 0x13 answering RELEASE (a server from before it) is the end of the session, not an error", run: releaseOldServer},
		{Name: "release-server-never-closes", Rule: "release: when the server does not close, the client resets the connection within min(lease, 2 s): no TIME_WAIT entry", run: releaseServerNeverCloses},
	}
}

// releaseSlack is how late the client's close may come after it is due: the
// release bound, or the server's close.
const releaseSlack = 750 * time.Millisecond

// releaseOnWire asks the driver to release a held lock and checks what the
// kit saw: RELEASE before the end of stream, the released event and no
// other, and no TIME_WAIT entry left on the client's port. It returns when
// RELEASE was read and the client's end of stream (at, and how: nil for a
// FIN).
func (e *Env) releaseOnWire(rule string, p *Process, c *ServerConn) (released, kitClosed, end time.Time, how error) {
	e.must("driver", p.Release())
	end, how, err := c.WaitEnd(safety)
	e.must(rule, err)
	released, kitClosed, ok := c.Released()
	if !ok {
		e.Failf("release (RELEASE before the end of stream)", "the client ended the connection (%s) without sending RELEASE (0x03) first", endName(how))
	}
	e.expect(rule, p, "released", safety)
	e.noEvent(rule+" (nothing after RELEASE is an error)", p, 100*time.Millisecond)
	clientPort, kitPort := c.Ports()
	n, err := tcpstate.TimeWaitAfterClose(clientPort, kitPort, safety)
	e.must("kit: the kernel's socket table", err)
	if n > 0 {
		e.Failf("release (no TIME_WAIT on the client)", "the client's port %d keeps %d TIME_WAIT entr(ies) for the connection: it closed first (%s)", clientPort, n, endName(how))
	}
	return released, kitClosed, end, how
}

// heldOn starts the judged client on a fresh fake server that answers
// RELEASE with answer, grants the lock and answers every heartbeat.
func (e *Env) heldOn(answer ReleaseAnswer, name string, lease time.Duration) (*FakeServer, *Process, *ServerConn) {
	f := e.Fake()
	f.OnRelease(answer)
	p, c, _ := e.grantedOn(f, NewRequest("", name, lease), usualToken, answerAll(usualToken))
	return f, p, c
}

func endName(how error) string {
	if how == nil {
		return "a FIN"
	}
	return "a reset: " + how.Error()
}

// releaseServerClosesFirst: lease 2 s, held; the kit answers RELEASE with its
// FIN at once. The client must have sent RELEASE, close only after the
// kit's FIN, and with a FIN (a client that resets right after RELEASE may
// have the server drop the byte with the reset).
func releaseServerClosesFirst(e *Env) {
	const rule = "release (the server closes first, the client second)"
	f, p, c := e.heldOn(CloseFirst, "release", 2*time.Second)
	_, kitClosed, end, how := e.releaseOnWire(rule, p, c)
	if how != nil || end.Before(kitClosed) {
		e.Failf(rule, "the client ended with %s %v after the server's FIN, want a FIN after it", endName(how), end.Sub(kitClosed).Round(time.Millisecond))
	}
	// A second release is harmless and opens nothing.
	e.must("driver", p.Release())
	e.expect("rule 7 (release is idempotent)", p, "released", safety)
	if n := f.Accepted(); n != 1 {
		e.Failf("rule 7 (release is idempotent)", "%d connections, want 1", n)
	}
}

// releaseOldServer: lease 2 s, held; the kit answers RELEASE with ERROR 0x13
// and its FIN, as a server from before RELEASE does. The release succeeds:
// released, no loss or error reported, and the client closes second.
func releaseOldServer(e *Env) {
	const rule = "release (ERROR 0x13 after RELEASE is the end, not an error)"
	_, p, c := e.heldOn(OldServer, "release-old", 2*time.Second)
	e.releaseOnWire(rule, p, c)
}

// releaseServerNeverCloses: lease 600 ms, so the release bound is 600 ms;
// the kit reads RELEASE and never closes. The client must end the
// connection itself by the bound (plus slack) and leave no TIME_WAIT entry:
// an abortive close (an RST).
func releaseServerNeverCloses(e *Env) {
	const lease = 600 * time.Millisecond
	const rule = "release (reset within min(lease, 2 s) when the server does not close)"
	_, p, c := e.heldOn(NeverClose, "release-stuck", lease)
	released, _, end, _ := e.releaseOnWire(rule, p, c)
	e.between(rule, "the time from RELEASE to the client's close", end.Sub(released), 0, lease+releaseSlack)
}
