package eventloop_test

import (
	"testing"

	"github.com/monolock/monolock/protocol/admin"
)

// Thousands of waiters on one lock are promoted strictly in arrival order,
// also when every second one leaves from the middle of the queue first.
func TestThousandsOfWaitersFIFO(t *testing.T) {
	for _, tc := range []struct {
		name  string
		leave func(i int) bool // which waiters close before any promotion
	}{
		{"all stay", func(int) bool { return false }},
		{"every second leaves", func(i int) bool { return i%2 == 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := fdBudget(t, 2000)
			if n < 10 {
				t.Skipf("descriptor limit leaves room for only %d connections", n)
			}
			ts := startServer(t, 0)
			const lock = "crowded"
			h, tok := holder(t, ts, lock, longLease)
			ws := queueWaiters(t, ts, lock, n)
			ts.waitStats(t, admin.Stats{Sessions: n + 1, Locks: 1, Waiters: n, Timers: n + 1})

			stay := 0
			for i, w := range ws {
				if tc.leave(i) {
					w.Close()
				} else {
					stay++
				}
			}
			ts.waitStats(t, admin.Stats{Sessions: stay + 1, Locks: 1, Waiters: stay, Timers: stay + 1})

			promoteInOrder(t, h, tok, ws, tc.leave)
			ts.waitStats(t, admin.Stats{})
		})
	}
}
