package locktable_test

import (
	"slices"
	"testing"
	"time"

	"github.com/monolock/monolock/locktable"
)

// session stands in for the event loop's session, which its claim points
// back to through Value.
type session struct{ id int }

// t0 is an arbitrary wall-clock instant with a non-zero sub-second part, so
// tests notice if the clock term of later grants ever uses anything but
// whole seconds, or a first grant leaves out the fraction.
var t0 = time.Unix(1_700_000_000, 123_456_789)

// t0Floor is t0's clock term, unixSeconds<<32. t0Frac is the part of t0's
// second that has passed in units of 2^-32 s: 123_456_789 * 2^32 / 10^9,
// rounded down. t0First is a fresh table's first token at t0: one second
// ahead, plus the fraction.
const (
	t0Floor = uint64(1_700_000_000) << 32
	t0Frac  = 530_242_871
	t0First = t0Floor + 1<<32 + t0Frac
)

// waiters collects the queue of name in FIFO order.
func waiters(tb *locktable.Table[*session], name string) []*locktable.Claim[*session] {
	return slices.Collect(tb.Waiters(name))
}

// mustPanic runs f and fails the test unless it panics.
func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s did not panic", what)
		}
	}()
	f()
}

// checkCounts compares the O(1) counters with the expected values.
func checkCounts(t *testing.T, tb *locktable.Table[*session], locks, waiting int) {
	t.Helper()
	if tb.Len() != locks || tb.Held() != locks || tb.Waiting() != waiting {
		t.Errorf("Len/Held/Waiting = %d/%d/%d, want %d/%d/%d",
			tb.Len(), tb.Held(), tb.Waiting(), locks, locks, waiting)
	}
}

func TestStateString(t *testing.T) {
	for s, want := range map[locktable.State]string{
		locktable.Idle: "idle", locktable.Waiting: "waiting", locktable.Holding: "holding", 7: "State(7)",
	} {
		if got := s.String(); got != want {
			t.Errorf("State(%d).String() = %q, want %q", uint8(s), got, want)
		}
	}
}

func TestZeroClaimIsIdle(t *testing.T) {
	var c locktable.Claim[*session]
	if c.State() != locktable.Idle || c.Token() != 0 || c.Name() != "" {
		t.Errorf("zero Claim: state %v token %d name %q", c.State(), c.Token(), c.Name())
	}
}

func TestGrantOnFreeLock(t *testing.T) {
	tb := locktable.New[*session]()
	var c locktable.Claim[*session]
	if !tb.Acquire(&c, "L", t0) {
		t.Fatal("Acquire on a free lock was not granted")
	}
	if c.State() != locktable.Holding || c.Name() != "L" || c.Token() != t0First {
		t.Errorf("claim: state %v name %q token %#x, want holding L %#x", c.State(), c.Name(), c.Token(), t0First)
	}
	if tb.Holder("L") != &c {
		t.Errorf("Holder(L) = %p, want %p", tb.Holder("L"), &c)
	}
	if tb.LastToken() != c.Token() {
		t.Errorf("LastToken = %#x, want %#x", tb.LastToken(), c.Token())
	}
	if tb.QueueLen("L") != 0 || len(waiters(tb, "L")) != 0 {
		t.Error("a fresh grant has waiters")
	}
	checkCounts(t, tb, 1, 0)
}

func TestQueueing(t *testing.T) {
	tb := locktable.New[*session]()
	var h, w1, w2 locktable.Claim[*session]
	tb.Acquire(&h, "L", t0)
	tok := h.Token()
	for _, w := range []*locktable.Claim[*session]{&w1, &w2} {
		if tb.Acquire(w, "L", t0) {
			t.Fatal("Acquire on a held lock was granted")
		}
		if w.State() != locktable.Waiting || w.Token() != 0 || w.Name() != "L" {
			t.Errorf("waiter: state %v token %d name %q", w.State(), w.Token(), w.Name())
		}
	}
	if got := waiters(tb, "L"); !slices.Equal(got, []*locktable.Claim[*session]{&w1, &w2}) {
		t.Errorf("Waiters = %p, want [%p %p]", got, &w1, &w2)
	}
	if tb.QueueLen("L") != 2 {
		t.Errorf("QueueLen = %d, want 2", tb.QueueLen("L"))
	}
	if tb.Holder("L") != &h || h.Token() != tok || tb.LastToken() != tok {
		t.Error("queueing disturbed the holder or issued a token")
	}
	checkCounts(t, tb, 1, 2)
}

func TestFIFOPromotion(t *testing.T) {
	tb := locktable.New[*session]()
	cs := make([]locktable.Claim[*session], 5)
	for i := range cs {
		tb.Acquire(&cs[i], "L", t0)
	}
	prev := cs[0].Token()
	for i := range len(cs) - 1 {
		p := tb.Release(&cs[i], t0)
		if p != &cs[i+1] {
			t.Fatalf("release of claim %d promoted %p, want claim %d (%p)", i, p, i+1, &cs[i+1])
		}
		if p.State() != locktable.Holding || p.Token() <= prev || tb.Holder("L") != p {
			t.Errorf("promoted claim %d: state %v token %#x (previous %#x)", i+1, p.State(), p.Token(), prev)
		}
		if cs[i].State() != locktable.Idle || cs[i].Token() != 0 || cs[i].Name() != "" {
			t.Errorf("released claim %d: state %v token %d name %q", i, cs[i].State(), cs[i].Token(), cs[i].Name())
		}
		prev = p.Token()
		checkCounts(t, tb, 1, len(cs)-2-i)
	}
	if p := tb.Release(&cs[len(cs)-1], t0); p != nil {
		t.Errorf("last release promoted %p", p)
	}
	checkCounts(t, tb, 0, 0)
}

func TestRemoveWaiterKeepsOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		gone []int // indexes into the 5 waiters, removed in this order
	}{
		{"head", []int{0}},
		{"middle", []int{2}},
		{"tail", []int{4}},
		{"head then tail", []int{0, 4}},
		{"middle neighbours", []int{2, 1, 3}},
		{"all from the back", []int{4, 3, 2, 1, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := locktable.New[*session]()
			var h locktable.Claim[*session]
			tb.Acquire(&h, "L", t0)
			ws := make([]locktable.Claim[*session], 5)
			for i := range ws {
				tb.Acquire(&ws[i], "L", t0)
			}
			for _, i := range tc.gone {
				if p := tb.Release(&ws[i], t0); p != nil {
					t.Fatalf("removing waiter %d promoted %p", i, p)
				}
				if ws[i].State() != locktable.Idle || ws[i].Name() != "" {
					t.Errorf("removed waiter %d is %v on %q", i, ws[i].State(), ws[i].Name())
				}
			}
			var want []*locktable.Claim[*session]
			for i := range ws {
				if !slices.Contains(tc.gone, i) {
					want = append(want, &ws[i])
				}
			}
			if got := waiters(tb, "L"); !slices.Equal(got, want) {
				t.Fatalf("Waiters = %p, want %p", got, want)
			}
			checkCounts(t, tb, 1, len(want))
			// The survivors are promoted in the same order.
			cur := &h
			for _, w := range want {
				if p := tb.Release(cur, t0); p != w {
					t.Fatalf("promoted %p, want %p", p, w)
				}
				cur = w
			}
			if p := tb.Release(cur, t0); p != nil {
				t.Fatalf("final release promoted %p", p)
			}
			checkCounts(t, tb, 0, 0)
		})
	}
}

func TestIdleLockForgotten(t *testing.T) {
	tb := locktable.New[*session]()
	var h, w locktable.Claim[*session]
	tb.Acquire(&h, "L", t0)
	tb.Acquire(&w, "L", t0)
	tb.Release(&h, t0) // w promoted, lock still live
	if tb.Len() != 1 || tb.Holder("L") != &w {
		t.Fatalf("after handover: Len %d, Holder %p, want 1, %p", tb.Len(), tb.Holder("L"), &w)
	}
	tb.Release(&w, t0)
	checkCounts(t, tb, 0, 0)
	if tb.Holder("L") != nil || tb.QueueLen("L") != 0 || len(waiters(tb, "L")) != 0 {
		t.Error("forgotten lock still visible")
	}
	for name := range tb.Locks() {
		t.Errorf("Locks yields forgotten lock %q", name)
	}
}

// TestRecycledLockTakesNewName guards the free list: a lock struct recycled
// for another name must not keep the old one.
func TestRecycledLockTakesNewName(t *testing.T) {
	tb := locktable.New[*session]()
	var a, b locktable.Claim[*session]
	tb.Acquire(&a, "first", t0)
	tb.Release(&a, t0)
	tb.Acquire(&b, "second", t0)
	if b.Name() != "second" || tb.Holder("second") != &b || tb.Holder("first") != nil {
		t.Errorf("recycled lock: Name %q, Holder(second) %p, Holder(first) %p", b.Name(), tb.Holder("second"), tb.Holder("first"))
	}
	for name, h := range tb.Locks() {
		if name != "second" || h != &b {
			t.Errorf("Locks yields %q -> %p", name, h)
		}
	}
}

func TestLocks(t *testing.T) {
	tb := locktable.New[*session]()
	cs := make([]locktable.Claim[*session], 6)
	names := []string{"a", "b", "a", "c", "b", "a"}
	for i, n := range names {
		tb.Acquire(&cs[i], n, t0)
	}
	got := map[string]*locktable.Claim[*session]{}
	for name, h := range tb.Locks() {
		if _, dup := got[name]; dup {
			t.Errorf("Locks yields %q twice", name)
		}
		got[name] = h
	}
	want := map[string]*locktable.Claim[*session]{"a": &cs[0], "b": &cs[1], "c": &cs[3]}
	if len(got) != len(want) {
		t.Errorf("Locks yields %d locks, want %d", len(got), len(want))
	}
	for n, h := range want {
		if got[n] != h {
			t.Errorf("Locks: %q -> %p, want %p", n, got[n], h)
		}
	}
	checkCounts(t, tb, 3, 3)
	// Early exit is honoured.
	n := 0
	for range tb.Locks() {
		n++
		break
	}
	if n != 1 {
		t.Errorf("break after 1 yielded %d", n)
	}
}

// TestKickAllWaiters releases each waiter from inside the Waiters loop, as a
// forced release of a whole queue would.
func TestKickAllWaiters(t *testing.T) {
	tb := locktable.New[*session]()
	cs := make([]locktable.Claim[*session], 5)
	for i := range cs {
		tb.Acquire(&cs[i], "L", t0)
	}
	var seen []*locktable.Claim[*session]
	for w := range tb.Waiters("L") {
		seen = append(seen, w)
		tb.Release(w, t0)
	}
	if want := []*locktable.Claim[*session]{&cs[1], &cs[2], &cs[3], &cs[4]}; !slices.Equal(seen, want) {
		t.Errorf("visited %p, want %p", seen, want)
	}
	if tb.Holder("L") != &cs[0] {
		t.Error("kicking waiters changed the holder")
	}
	checkCounts(t, tb, 1, 0)
}

func TestTokensIncreaseAcrossLocks(t *testing.T) {
	tb := locktable.New[*session]()
	names := []string{"a", "b", "c"}
	var prev uint64
	check := func(c *locktable.Claim[*session]) {
		t.Helper()
		if c.Token() <= prev {
			t.Fatalf("token %#x after %#x", c.Token(), prev)
		}
		if c.Token() != tb.LastToken() {
			t.Fatalf("token %#x, LastToken %#x", c.Token(), tb.LastToken())
		}
		prev = c.Token()
	}
	// Same instant throughout, so only the prev+1 term can keep tokens apart.
	for round := range 50 {
		holders := make([]*locktable.Claim[*session], len(names))
		for i, n := range names {
			holders[i] = new(locktable.Claim[*session])
			if !tb.Acquire(holders[i], n, t0) {
				t.Fatalf("round %d: %s not granted", round, n)
			}
			check(holders[i])
			// Queue one waiter to be promoted on release.
			w := new(locktable.Claim[*session])
			tb.Acquire(w, n, t0)
		}
		for _, h := range holders {
			p := tb.Release(h, t0)
			check(p)
			tb.Release(p, t0)
		}
	}
	if want := t0First + 50*6 - 1; prev != want {
		t.Errorf("last token %#x, want %#x (one per grant from the first)", prev, want)
	}
}

func TestTokenFloorFromClock(t *testing.T) {
	tb := locktable.New[*session]()
	var a, b, c, d locktable.Claim[*session]
	tb.Acquire(&a, "a", t0)
	if a.Token() != t0First {
		t.Errorf("first token %#x, want (unix+1)<<32 | fraction = %#x", a.Token(), t0First)
	}
	tb.Acquire(&b, "b", t0.Add(500*time.Millisecond)) // same second
	if b.Token() != t0First+1 {
		t.Errorf("same-second token %#x, want %#x", b.Token(), t0First+1)
	}
	// The clock reaches the second the first grant skipped to: its floor
	// is below the sequence, which counts on.
	tb.Acquire(&c, "c", t0.Add(time.Second))
	if c.Token() != t0First+2 {
		t.Errorf("next-second token %#x, want %#x", c.Token(), t0First+2)
	}
	// One more second and the clock term takes over again.
	tb.Acquire(&d, "d", t0.Add(2*time.Second))
	if want := t0Floor + 2<<32; d.Token() != want {
		t.Errorf("token two seconds on %#x, want %#x", d.Token(), want)
	}
}

func TestClockSteppingBack(t *testing.T) {
	tb := locktable.New[*session]()
	var a, b, c, d locktable.Claim[*session]
	tb.Acquire(&a, "a", t0)
	tb.Acquire(&b, "b", t0.Add(-time.Hour))
	if b.Token() != a.Token()+1 {
		t.Errorf("token after clock step back %#x, want %#x", b.Token(), a.Token()+1)
	}
	tb.Acquire(&c, "c", time.Unix(-5, 0)) // before 1970
	if c.Token() != b.Token()+1 {
		t.Errorf("token with pre-1970 clock %#x, want %#x", c.Token(), b.Token()+1)
	}
	// A promotion after the step back counts up too.
	tb.Acquire(&d, "a", t0.Add(-time.Minute))
	if p := tb.Release(&a, t0.Add(-2*time.Minute)); p != &d || d.Token() != c.Token()+1 {
		t.Errorf("promotion after clock step back: %p token %#x, want %p %#x", p, d.Token(), &d, c.Token()+1)
	}
}

func TestSetLastToken(t *testing.T) {
	tb := locktable.New[*session]()
	if tb.LastToken() != 0 {
		t.Fatalf("new table LastToken %d", tb.LastToken())
	}
	floor := t0Floor + 1<<40
	tb.SetLastToken(floor)
	tb.SetLastToken(5) // never lowers
	if tb.LastToken() != floor {
		t.Fatalf("LastToken %#x, want %#x", tb.LastToken(), floor)
	}
	var c locktable.Claim[*session]
	tb.Acquire(&c, "L", t0)
	if c.Token() != floor+1 {
		t.Errorf("token above floor %#x, want %#x", c.Token(), floor+1)
	}
}

// TestSetLastTokenIsNotAFirstGrant checks that a table given a floor grants
// as a table that has already issued tokens: the clock term of the current
// second, not the next. SetLastToken(0) leaves a fresh table fresh.
func TestSetLastTokenIsNotAFirstGrant(t *testing.T) {
	tb := locktable.New[*session]()
	tb.SetLastToken(7) // far below the clock
	var c locktable.Claim[*session]
	tb.Acquire(&c, "L", t0)
	if c.Token() != t0Floor {
		t.Errorf("token after a low floor %#x, want unix<<32 = %#x", c.Token(), t0Floor)
	}

	fresh := locktable.New[*session]()
	fresh.SetLastToken(0)
	var d locktable.Claim[*session]
	fresh.Acquire(&d, "L", t0)
	if d.Token() != t0First {
		t.Errorf("token after SetLastToken(0) %#x, want a first grant's %#x", d.Token(), t0First)
	}
}

func TestAcquireNonIdlePanics(t *testing.T) {
	tb := locktable.New[*session]()
	var h, w locktable.Claim[*session]
	tb.Acquire(&h, "L", t0)
	tb.Acquire(&w, "L", t0)
	mustPanic(t, "Acquire of a holding claim", func() { tb.Acquire(&h, "M", t0) })
	mustPanic(t, "Acquire of a waiting claim", func() { tb.Acquire(&w, "L", t0) })
	if h.State() != locktable.Holding || w.State() != locktable.Waiting || tb.QueueLen("L") != 1 || tb.Holder("M") != nil {
		t.Error("a refused Acquire changed the table")
	}
	checkCounts(t, tb, 1, 1)
}

func TestReleaseIdleIsNoop(t *testing.T) {
	tb := locktable.New[*session]()
	var h, idle locktable.Claim[*session]
	tb.Acquire(&h, "L", t0)
	last := tb.LastToken()
	if p := tb.Release(&idle, t0); p != nil {
		t.Errorf("Release of a new claim returned %p", p)
	}
	var gone locktable.Claim[*session]
	tb.Acquire(&gone, "L", t0)
	tb.Release(&gone, t0)
	if p := tb.Release(&gone, t0); p != nil {
		t.Errorf("second Release returned %p", p)
	}
	if tb.Holder("L") != &h || tb.LastToken() != last {
		t.Error("releasing an idle claim changed the table")
	}
	checkCounts(t, tb, 1, 0)
}

func TestValueUntouched(t *testing.T) {
	tb := locktable.New[*session]()
	s1, s2 := &session{1}, &session{2}
	h := &locktable.Claim[*session]{Value: s1}
	w := &locktable.Claim[*session]{Value: s2}
	tb.Acquire(h, "L", t0)
	tb.Acquire(w, "L", t0)
	p := tb.Release(h, t0)
	if p.Value != s2 || h.Value != s1 {
		t.Errorf("Value changed: promoted %v, released %v", p.Value, h.Value)
	}
	tb.Release(w, t0)
	if w.Value != s2 {
		t.Errorf("Value changed on final release: %v", w.Value)
	}
}

// TestTokenExhaustionLeavesTableConsistent checks that running out of tokens
// panics before any state changes, so a recovered caller sees no half-done
// grant.
func TestTokenExhaustionLeavesTableConsistent(t *testing.T) {
	tb := locktable.New[*session]()
	var h, w, c locktable.Claim[*session]
	tb.Acquire(&h, "L", t0)
	tb.Acquire(&w, "L", t0)
	tb.SetLastToken(^uint64(0))
	mustPanic(t, "grant with no tokens left", func() { tb.Acquire(&c, "M", t0) })
	if c.State() != locktable.Idle || tb.Holder("M") != nil {
		t.Error("failed grant left state behind")
	}
	mustPanic(t, "promotion with no tokens left", func() { tb.Release(&h, t0) })
	if h.State() != locktable.Holding || w.State() != locktable.Waiting || tb.Holder("L") != &h {
		t.Error("failed promotion left state behind")
	}
	checkCounts(t, tb, 1, 1)
}

func TestAcquireBytesSharesTheName(t *testing.T) {
	tb := locktable.New[*session]()
	var h, w locktable.Claim[*session]
	if !tb.AcquireBytes(&h, []byte("L"), t0) || tb.AcquireBytes(&w, []byte("L"), t0) {
		t.Fatal("want the first granted and the second queued")
	}
	if h.Name() != "L" || w.Name() != "L" || tb.QueueLen("L") != 1 {
		t.Fatalf("names %q %q, queue %d", h.Name(), w.Name(), tb.QueueLen("L"))
	}
	buf := []byte("L")
	var w2 locktable.Claim[*session]
	if n := testing.AllocsPerRun(1, func() {
		tb.AcquireBytes(&w2, buf, t0)
		tb.Release(&w2, t0)
	}); n != 0 {
		t.Errorf("a waiter's AcquireBytes allocated %v times", n)
	}
}
