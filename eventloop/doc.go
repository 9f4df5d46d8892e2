// Package eventloop is the monolock server runtime: it owns the sockets and
// time, and drives the pure lock table.
//
// One gnet event loop is the owner goroutine. It parses frames straight from
// gnet's inbound buffers, runs the lock table and the timer wheel, and writes
// every reply, including the ACQUIRED pushed to a promoted waiter. Nothing else
// touches that state, so the hot path takes no lock. Work from other goroutines
// (the ticker, Shutdown, inspection) enters the loop through a queue of ours
// that the loop serves, a bounded slice per turn, when a control socket it
// polls with the others becomes readable (see call.go).
//
// Connections are accepted by a goroutine of ours rather than by gnet, which
// stops its poller when accept(2) fails with EMFILE; ours backs off and retries,
// and hands each connection to gnet's loop.
package eventloop
