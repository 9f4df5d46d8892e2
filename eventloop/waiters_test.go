package eventloop_test

import (
	"fmt"
	"testing"

	"github.com/monolock/monolock/eventloop"
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
			ws := make([]*conn, n)
			for i := range ws {
				// The WAITING is read before the next waiter connects, so the
				// index is the arrival order.
				ws[i] = waiter(t, ts, fmt.Sprintf("waiter %d", i), lock, longLease)
			}
			ts.waitStats(t, eventloop.Stats{Sessions: n + 1, Locks: 1, Waiters: n, Timers: n + 1})

			stay := 0
			for i, w := range ws {
				if tc.leave(i) {
					w.close()
				} else {
					stay++
				}
			}
			ts.waitStats(t, eventloop.Stats{Sessions: stay + 1, Locks: 1, Waiters: stay, Timers: stay + 1})

			cur := h
			for i, w := range ws {
				if tc.leave(i) {
					continue
				}
				cur.close()
				// Were anyone else promoted, w would see nothing and the
				// read would time out.
				next := w.expectAcquired()
				if next <= tok {
					t.Fatalf("waiter %d: token %d after %d", i, next, tok)
				}
				tok, cur = next, w
			}
			cur.close()
			ts.waitStats(t, eventloop.Stats{})
		})
	}
}
