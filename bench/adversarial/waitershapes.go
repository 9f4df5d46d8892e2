package main

import (
	"context"
	"time"

	"github.com/monolock/monolock/internal/testsupport/wire"
	"github.com/monolock/monolock/protocol"
)

// --- 9, 10, 18 to 21: the shapes of the waiters at the descriptor limit ---
//
// The attacks on the server filled with waiters (silentwaiters.go) differ
// in what the waiters do and how old they are when the window opens:
//
//   - aged (9, 10): they never heartbeat, and have been silent past the
//     server's -waiter-silence-limit, shortened to 10 s so that the run
//     stays short;
//   - young (17, 18): they never heartbeat, and the window opens as soon as
//     the churners run, under the default limit of a minute: the attack's
//     first seconds, when no waiter has been silent long enough to be
//     closed for it;
//   - slow heartbeaters (19, 20): each sends a HEARTBEAT every 50 s, so it
//     is never silent for the default minute; their phases are spread over
//     the 50 s, so some of them heartbeat during any window.
//
// The attacker — waiters, their children and churners — connects from
// attackSource, another loopback address than the witnesses' and honest
// clients' 127.0.0.1: one host, one source for the server's per-source
// rule. Each shape runs at -waiters-nofile (2,000 by default, about 20 s to
// fill and run) and at full size with -waiters-nofile 20000.

// attackSource is the address the attacker connects from.
const attackSource = "127.0.0.2"

// waiterShape is what the waiters do and how long the attack runs before
// its window opens.
type waiterShape struct {
	name      string
	silence   time.Duration // the server's -waiter-silence-limit; 0 for its default
	age       time.Duration // from the churners' start to the window's
	heartbeat time.Duration // each waiter's heartbeat interval; 0 for never
}

// slowHeartbeat is the slow heartbeaters' interval: under the default
// -waiter-silence-limit of a minute.
const slowHeartbeat = 50 * time.Second

var (
	agedWaiters = waiterShape{name: "silent past -waiter-silence-limit 10s", silence: 10 * time.Second, age: 11 * time.Second}
	// The young waiters' window opens once the churners have had a
	// second to fill the descriptors.
	youngWaiters    = waiterShape{name: "silent, younger than -waiter-silence-limit 1m", age: time.Second}
	slowHeartbeater = waiterShape{name: "each heartbeating every 50s", age: time.Second, heartbeat: slowHeartbeat}
)

func prepareYoungWaitersPlain(e *env) (*waitersAttack, []*witnesses, func(), error) {
	return prepareWaiters(e, false, youngWaiters)
}

func prepareYoungWaitersMTLS(e *env) (*waitersAttack, []*witnesses, func(), error) {
	return prepareWaiters(e, true, youngWaiters)
}

func prepareSlowHeartbeatersPlain(e *env) (*waitersAttack, []*witnesses, func(), error) {
	return prepareWaiters(e, false, slowHeartbeater)
}

func prepareSlowHeartbeatersMTLS(e *env) (*waitersAttack, []*witnesses, func(), error) {
	return prepareWaiters(e, true, slowHeartbeater)
}

// heartbeatStep is how often heartbeatSlowly looks for waiters due.
const heartbeatStep = 100 * time.Millisecond

// heartbeatSlowly sends each of waiters a HEARTBEAT at once (however long
// they took to queue, none has been silent for interval), then every
// interval, their phases spread evenly over it, until ctx ends. A waiter
// the server has closed is left alone; its answers are never read (the
// kernel acknowledges them, so they hold nothing up).
func heartbeatSlowly(ctx context.Context, waiters []*wire.Conn, interval time.Duration) {
	if len(waiters) == 0 {
		return
	}
	beat := protocol.AppendHeartbeat(nil)
	dead := make([]bool, len(waiters))
	send := func(i int) {
		c := waiters[i]
		_ = c.NC.SetWriteDeadline(time.Now().Add(time.Second))
		if _, err := c.NC.Write(beat); err != nil {
			dead[i] = true
		}
	}
	for i := range waiters {
		send(i)
	}
	start := time.Now()
	next := 0 // the next waiter due, cycling; its first is a step in
	for cycle := heartbeatStep; ; {
		if !pause(ctx, heartbeatStep) {
			return
		}
		elapsed := time.Since(start)
		for ; ; next++ {
			if next == len(waiters) {
				next, cycle = 0, cycle+interval
			}
			due := cycle + interval*time.Duration(next)/time.Duration(len(waiters))
			if due > elapsed {
				break
			}
			if !dead[next] {
				send(next)
			}
		}
	}
}
