package conformance

import (
	"net"
	"sync/atomic"

	"github.com/monolock/monolock/protocol"
)

func failoverScenarios() []Scenario {
	return []Scenario{
		{Name: "several-addresses", Rule: "several addresses: a refused address is passed over within the attempt; the next attempt starts from the address that worked",
			Needs: FeatureAddresses, Attempts: 2, run: severalAddresses},
	}
}

// severalAddresses: run mode, lease 2 s, the addresses [a closed port, a
// fake server]. The first connection must reach the fake server (the
// refused address passed over at once). The kit queues it, then listens on
// the first address itself and ends the session with ERROR 0x01: the
// client's next connection must go to the fake server, the address that
// worked, and not to the first address, which now accepts (the kit would
// see it). Granted there. Attempts 2: the closed port is an ephemeral one
// the kit released, which the system may, rarely, hand to a client socket
// before the kit listens on it again.
func severalAddresses(e *Env) {
	const rule = "several addresses (a refused address is passed over at once, within the same attempt)"
	reserved, err := net.Listen("tcp", "127.0.0.1:0")
	e.must("kit", err)
	closed := reserved.Addr().String()
	e.must("kit", reserved.Close())
	f := e.Fake()
	req := NewRequest(closed, "several-addresses", lateLease)
	req.Addresses = []string{closed, f.Addr()}
	req.Mode = ModeRun
	p := e.StartJudged(req)
	c, err := f.Next(safety)
	e.must(rule, err)
	_, err = c.NextReq(safety)
	e.must("frames: ACQUIRE", err)
	e.must("kit", c.Reply(waiting()))

	// The first address accepts from now on: a connection there is seen.
	first, err := net.Listen("tcp", closed)
	e.must("kit: listen on the first address again", err)
	defer func() { _ = first.Close() }()
	var wrong atomic.Int32
	wrongConn := make(chan struct{}, 1)
	go func() {
		for {
			conn, err := first.Accept()
			if err != nil {
				return
			}
			wrong.Add(1)
			_ = conn.Close()
			select {
			case wrongConn <- struct{}{}:
			default:
			}
		}
	}()
	e.must("kit", c.Write(errorFrame(protocol.CodeShuttingDown, "server shutting down")))
	c.Close()

	next := make(chan *ServerConn, 1)
	go func() {
		c2, err := f.Next(safety)
		if err == nil {
			next <- c2
		}
		close(next)
	}()
	const from = "several addresses (the next attempt starts from the address that last worked)"
	var c2 *ServerConn
	select {
	case c2 = <-next:
	case <-wrongConn:
		e.Failf(from, "after ERROR 0x01 the client connected to %s, which had refused it, before %s, where it had been queued", closed, f.Addr())
	}
	if c2 == nil {
		e.Failf("rule 6 (reconnect after 0x01 under run)", "no new connection to %s within %v of ERROR 0x01 (%d to %s)", f.Addr(), safety, wrong.Load(), closed)
	}
	_, err = c2.NextReq(safety)
	e.must("frames: ACQUIRE", err)
	e.must("kit", c2.Reply(acquired(usualToken)))
	e.expectToken(p, usualToken)
	if n := wrong.Load(); n > 0 {
		e.Failf(from, "%d connection(s) to %s, which had refused the client, besides the one to %s that worked", n, closed, f.Addr())
	}
	e.releaseAndClose(p, c2)
}
