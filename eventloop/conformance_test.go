package eventloop_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monolock/monolock/internal/testsupport/wire"
	"github.com/monolock/monolock/protocol"
	"github.com/monolock/monolock/protocol/admin"
)

// The conformance cases of protocol.md, over real TCP. Cases 4, 5 and 6 (the
// wire-level ones) are in wire_test.go.

// Case 1: free lock: ACQUIRE → ACQUIRED(t); HEARTBEAT → ACQUIRED(t).
func TestConformance1FreeLock(t *testing.T) {
	ts := startServer(t, 0)
	c := dial(t, ts, "client")
	c.SendAcquire("case-1", 30_000)
	tok := c.ExpectAcquired()
	if tok == 0 {
		t.Fatal("token 0: tokens come from the clock and are never zero")
	}
	for range 3 {
		c.SendHeartbeat()
		c.ExpectToken(tok)
	}
	if st := ts.stats(t); st != (admin.Stats{Sessions: 1, Locks: 1, Waiters: 0, Timers: 1, Grants: 1, NewestToken: tok}) {
		t.Errorf("Stats = %+v with one holder, want one grant and its token %d the newest", st, tok)
	}
	c.Close()
	ts.waitStats(t, admin.Stats{})
}

// Case 2: busy lock: WAITING, HEARTBEAT → WAITING, and when the holder closes
// the waiter is pushed ACQUIRED(t2 > t) without sending anything.
func TestConformance2BusyLock(t *testing.T) {
	ts := startServer(t, 0)
	h, t1 := holder(t, ts, "case-2", 30_000)
	w := waiter(t, ts, "waiter", "case-2", 30_000)
	for range 3 {
		w.SendHeartbeat()
		w.ExpectWaiting()
	}
	h.SendHeartbeat() // the holder is unaffected by the waiter
	h.ExpectToken(t1)
	if st := ts.stats(t); st.Locks != 1 || st.Waiters != 1 {
		t.Errorf("Stats = %+v, want 1 lock and 1 waiter", st)
	}

	h.Close()
	t2 := w.ExpectAcquired() // pushed: the waiter sent nothing since its last WAITING
	if t2 <= t1 {
		t.Fatalf("promotion token %d is not greater than the first holder's %d", t2, t1)
	}
	w.SendHeartbeat()
	w.ExpectToken(t2) // ACQUIRED never goes back, and repeats the same token
	w.Close()
	ts.waitStats(t, admin.Stats{})
}

// Case 3: FIFO: 50 waiters are promoted in arrival order, and waiters leaving
// the head, the middle and the tail of the queue do not disturb the rest.
func TestConformance3FIFO(t *testing.T) {
	ts := startServer(t, 0)
	const n = 50
	const lock = "case-3"
	h, tok := holder(t, ts, lock, longLease)
	ws := queueWaiters(t, ts, lock, n)
	leaving := map[int]bool{0: true, n / 2: true, n/2 + 1: true, n - 1: true}
	for i := range leaving {
		ws[i].Close()
	}
	ts.waitStats(t, admin.Stats{Sessions: 1 + n - len(leaving), Locks: 1, Waiters: n - len(leaving), Timers: 1 + n - len(leaving)})

	promoteInOrder(t, h, tok, ws, func(i int) bool { return leaving[i] })
	ts.waitStats(t, admin.Stats{})
}

// Case 7: a silent holder is dropped after its lease, never before, without an
// ERROR, and the waiter is promoted.
func TestConformance7SilentHolderExpires(t *testing.T) {
	ts := startServer(t, 0)
	const lease = 100 * time.Millisecond
	const lock = "case-7"

	w0 := dial(t, ts, "silent holder")
	lastSend := time.Now() // before the write: the server's lastSeen is no earlier
	w0.SendAcquire(lock, uint32(lease/time.Millisecond))
	t1 := w0.ExpectAcquired()
	w := waiter(t, ts, "waiter", lock, longLease)

	t2 := w.ExpectAcquired() // the event: the holder's expiry promotes the waiter
	promotedAfter := time.Since(lastSend)
	w0.ExpectEOF() // closed without an ERROR frame
	closedAfter := time.Since(lastSend)

	t.Logf("lease %v: waiter promoted %v after the holder's last send (%v late), holder saw EOF after %v",
		lease, promotedAfter, promotedAfter-lease, closedAfter)
	if promotedAfter < lease || closedAfter < lease {
		t.Fatalf("holder dropped before its lease: promoted after %v, EOF after %v, lease %v", promotedAfter, closedAfter, lease)
	}
	if t2 <= t1 {
		t.Fatalf("token %d after %d", t2, t1)
	}
	w.Close()
	ts.waitStats(t, admin.Stats{})
}

// Case 7, the other side: holders that heartbeat keep their locks for twenty
// leases while their waiters stay WAITING; when they fall silent they expire.
//
// A 100 ms lease leaves the heartbeating goroutines 80 ms of slack. On a
// loaded machine (go test -race next to other builds) a goroutine can be
// starved for that long, which makes a drop legitimate; so a round in which a
// holder is dropped is logged with its send gaps and retried on fresh locks,
// and only a drop in every round fails. A server that drops heartbeating
// holders fails every round.
func TestConformance7HeartbeatsKeepLock(t *testing.T) {
	ts := startServer(t, 0)
	const rounds = 3
	for round := range rounds {
		err := heartbeatRound(t, ts, round)
		if err == nil {
			return
		}
		t.Logf("round %d: %v", round, err)
	}
	t.Fatalf("a heartbeating holder was dropped in each of %d rounds", rounds)
}

// heartbeatRound runs one round of TestConformance7HeartbeatsKeepLock. It
// reports a dropped holder as an error and fails the test on anything else.
func heartbeatRound(t *testing.T, ts *testServer, round int) error {
	const (
		lease    = 100 * time.Millisecond
		interval = 20 * time.Millisecond
		holders  = 3
	)
	type pair struct {
		h, w     *wire.Conn
		tok      uint64
		lastSend time.Time // just before the holder's last heartbeat
	}
	pairs := make([]pair, holders)
	for i := range pairs {
		name := fmt.Sprintf("case-7-hb-%d-%d", round, i)
		h, tok := holder(t, ts, name, uint32(lease/time.Millisecond))
		pairs[i] = pair{h: h, w: waiter(t, ts, "waiter of "+name, name, longLease), tok: tok}
	}
	defer func() {
		for _, p := range pairs {
			_ = p.h.NC.Close()
			_ = p.w.NC.Close()
		}
	}()

	errs := make(chan error, holders)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range pairs {
		p := &pairs[i]
		wg.Go(func() {
			tick := time.NewTicker(interval)
			defer tick.Stop()
			var last, maxGap time.Duration
			start := time.Now()
			for {
				now := time.Since(start)
				maxGap, last = max(maxGap, now-last), now
				p.lastSend = time.Now()
				if err := p.h.SendErr(wire.Heartbeat); err != nil {
					errs <- fmt.Errorf("%s: heartbeat at %v: %w (longest gap between sends %v)", p.h.Label, now, err, maxGap)
					return
				}
				f, err := p.h.ReadErr(safety)
				if err != nil || f.Type != protocol.TypeAcquired || f.Token != p.tok {
					errs <- fmt.Errorf("%s: heartbeat at %v answered %v, %v, want ACQUIRED(%d) (longest gap between sends %v)",
						p.h.Label, now, f, err, p.tok, maxGap)
					return
				}
				select {
				case <-stop:
					return
				case <-tick.C:
				}
			}
		})
	}
	var dropped error
	select {
	case <-time.After(20 * lease): // the point of the test: time passes
	case err := <-errs:
		dropped = err
	}
	if dropped == nil {
		// While the holders still heartbeat: nothing was pushed to the
		// waiters, whose next frame answers this heartbeat.
		for i := range pairs {
			w := pairs[i].w // not a copy of the pair: its holder's goroutine writes lastSend
			if err := w.SendErr(wire.Heartbeat); err != nil {
				t.Fatalf("%s: %v", w.Label, err)
			}
			if f, err := w.ReadErr(safety); err != nil || f.Type != protocol.TypeWaiting {
				dropped = fmt.Errorf("%s: got %v, %v, want WAITING: its holder was dropped", w.Label, f, err)
				break
			}
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		dropped = errors.Join(dropped, err)
	}
	if dropped != nil {
		return dropped
	}
	// Now they fall silent: each expires, not before its lease counted from
	// its last heartbeat (the re-armed timer), and its waiter is promoted.
	for _, p := range pairs {
		if tok := p.w.ExpectAcquired(); tok <= p.tok {
			t.Fatalf("%s: token %d after %d", p.w.Label, tok, p.tok)
		}
		d := time.Since(p.lastSend)
		t.Logf("%s: dropped %v after its last heartbeat (lease %v)", p.h.Label, d, lease)
		if d < lease {
			t.Fatalf("%s: dropped %v after its last heartbeat, before its lease %v", p.h.Label, d, lease)
		}
		p.h.ExpectEOF()
	}
	return nil
}

// Case 7, for a waiter: a silent waiter expires and leaves the queue; the
// others keep their order.
func TestConformance7SilentWaiterExpires(t *testing.T) {
	ts := startServer(t, 0)
	const lease = 100 * time.Millisecond
	const lock = "case-7-waiter"
	h, tok := holder(t, ts, lock, longLease)
	w1 := waiter(t, ts, "waiter 1", lock, longLease)

	w2 := dial(t, ts, "silent waiter 2")
	lastSend := time.Now()
	w2.SendAcquire(lock, uint32(lease/time.Millisecond))
	w2.ExpectWaiting()

	w3 := waiter(t, ts, "waiter 3", lock, longLease)
	w2.ExpectEOF()
	if d := time.Since(lastSend); d < lease {
		t.Fatalf("silent waiter dropped %v after its last send, before its lease %v", d, lease)
	} else {
		t.Logf("silent waiter dropped %v after its last send (lease %v)", d, lease)
	}
	ts.waitStats(t, admin.Stats{Sessions: 3, Locks: 1, Waiters: 2, Timers: 3})

	h.Close()
	t1 := w1.ExpectAcquired()
	w1.Close()
	t3 := w3.ExpectAcquired()
	if !(tok < t1 && t1 < t3) {
		t.Fatalf("tokens %d, %d, %d do not increase", tok, t1, t3)
	}
	w3.Close()
	ts.waitStats(t, admin.Stats{})
}

// Case 8: tokens strictly increase over 200 grants across several locks, fresh
// grants and promotions interleaved.
func TestConformance8TokensIncrease(t *testing.T) {
	ts := startServer(t, 0)
	const grants, locks = 200, 5
	var (
		last       uint64
		prev       [locks]*wire.Conn
		promotions int
	)
	for i := range grants {
		k := i % locks
		name := fmt.Sprintf("case-8-%d", k)
		c := dial(t, ts, fmt.Sprintf("grant %d on %s", i, name))
		c.SendAcquire(name, longLease)
		// Every other round the previous holder of this lock is still there:
		// c waits and is promoted when it leaves. Otherwise the lock is free.
		if p := prev[k]; p != nil {
			c.ExpectWaiting()
			p.Close()
			promotions++
		}
		tok := c.ExpectAcquired()
		if tok <= last {
			t.Fatalf("grant %d: token %d after %d", i, tok, last)
		}
		last = tok
		if i%2 == 0 {
			prev[k] = c // keep it: the next grant of this lock is a promotion
		} else {
			prev[k] = nil
			c.Close()
		}
	}
	t.Logf("%d grants, %d of them promotions; last token %#x", grants, promotions, last)
}

// A holder that breaks the protocol is closed and its lock passes to the next
// waiter at once.
func TestProtocolErrorReleasesLock(t *testing.T) {
	ts := startServer(t, 0)
	for _, tc := range []struct {
		name string
		bad  []byte
		code protocol.Code
	}{
		{"unknown type", []byte{0x7f}, protocol.CodeUnknownMessageType},
		{"duplicate ACQUIRE", wire.Acquire("other", 1000), protocol.CodeDuplicateAcquire},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lock := "released-by-error/" + tc.name
			h, t1 := holder(t, ts, lock, longLease)
			w := waiter(t, ts, "waiter", lock, longLease)
			h.Send(tc.bad)
			h.ExpectErrorThenEOF(tc.code)
			if t2 := w.ExpectAcquired(); t2 <= t1 {
				t.Fatalf("token %d after %d", t2, t1)
			}
		})
	}
}

// Names are raw bytes compared exactly: case sensitive, no trimming, no
// normalization; 255 bytes and multi-byte UTF-8 work.
func TestLockNamesAreExactBytes(t *testing.T) {
	ts := startServer(t, 0)
	b := make([]byte, protocol.MaxNameLen)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	long := string(b)
	euros := strings.Repeat("€", protocol.MaxNameLen/3) // 3 bytes each: 255 bytes of multi-byte UTF-8
	names := []string{
		"a", "A", "a ", " a", "a\x00", // case, trailing and leading space, NUL are all significant
		"é", "e\u0301", // precomposed and decomposed: no normalization
		"ロック/😀", "nightly/*", long, euros,
	}
	if len(long) != protocol.MaxNameLen || len(euros) != protocol.MaxNameLen {
		t.Fatalf("bad test names: %d and %d bytes", len(long), len(euros))
	}
	holders := map[string]uint64{}
	for _, name := range names {
		_, tok := holder(t, ts, name, longLease) // each a distinct, free lock
		holders[name] = tok
	}
	if st := ts.stats(t); st.Locks != len(names) {
		t.Fatalf("Stats = %+v, want %d distinct locks", st, len(names))
	}
	for _, name := range names {
		// A second claim on the very same bytes waits.
		waiter(t, ts, fmt.Sprintf("waiter on %q", name), name, longLease)
	}
	if st := ts.stats(t); st.Locks != len(names) || st.Waiters != len(names) {
		t.Fatalf("Stats = %+v, want %d locks with one waiter each", st, len(names))
	}
}

// A server restarted at once, within the same wall-clock second as its
// predecessor's grants, still issues larger tokens: fencing needs no pause
// between the two processes.
func TestTokensGrowAcrossAnImmediateRestart(t *testing.T) {
	var last uint64
	for round := range 5 {
		ts := startServer(t, 0)
		var tok uint64
		for i := range 3 {
			c := dial(t, ts, fmt.Sprintf("round %d holder %d", round, i))
			c.SendAcquire("fenced", longLease)
			tok = c.ExpectAcquired()
			if tok <= last {
				t.Fatalf("round %d: token %#x after %#x from the previous server", round, tok, last)
			}
			last = tok
			c.Close()
		}
		ctx, cancel := context.WithTimeout(context.Background(), safety)
		ts.shutdown(t, ctx)
		cancel()
	}
}
