// Package eventloop is the monolock server runtime: it owns the sockets and
// time, and drives the pure lock table.
//
// One gnet event loop is the owner goroutine. It parses frames straight from
// gnet's inbound buffers, runs the lock table and the timer wheel, and writes
// every reply, including the ACQUIRED pushed to a promoted waiter. Nothing else
// touches that state, so the hot path takes no lock. The owner works in turns
// (turn.go): each reads the clock once, its rules record effects, and the
// effects are applied at its end. Work from other goroutines (the ticker,
// Shutdown, the admin calls) enters the loop through a queue of ours that the
// loop serves, a bounded slice per turn, when a control socket it polls with
// the others becomes readable (see control_conn.go).
//
// The owner's rules are split by step — frames.go (input, answers,
// rejections), timers.go (deadlines), release.go (sessions ending, locks
// changing hands), ha.go (a node's terms in a cluster led through etcd) —
// and record effects that turn.go applies.
//
// An underscore in a file name says who runs the file — loop_callbacks.go
// (gnet's callbacks, on the loop), ticker_goroutine.go,
// handshake_goroutine.go beside handshake_loop.go, admin_calls.go (calls
// from the admin API into the loop), ha_calls.go (the etcd side's events,
// calls into the loop), haterms_goroutine.go (a node's lock listener,
// opened and closed per term), control_conn.go (how any goroutine reaches
// the loop) — or, in outq_linux.go and outq_other.go, a build tag.
// Every other file is named for its one job in one word.
//
// Connections are accepted by a goroutine of ours rather than by gnet, which
// stops its poller when accept(2) fails with EMFILE; ours backs off and retries,
// and hands each connection to gnet's loop.
package eventloop
