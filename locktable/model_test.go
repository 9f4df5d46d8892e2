package locktable

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// This file checks Table against a deliberately naive model: each lock is a
// slice whose first element is the holder and the rest the FIFO queue, and
// tokens are recomputed from the spec's formula. The model shares no code
// with the table (not even NextToken), so a bug has to be made twice to hide.

// mclaim is the model's view of one claim.
type mclaim struct {
	c     *Claim[int]
	id    int
	name  string // "" when idle
	token uint64 // 0 unless holding
}

type model struct {
	locks    map[string][]*mclaim // [0] holds, [1:] wait in order; absent when idle
	claims   []*mclaim            // every claim ever created
	last     uint64               // model's last token (or floor)
	observed uint64               // last token seen coming out of the table
	now      time.Time
}

// modelToken is the spec's formula, written out independently: a table's
// first grant (nothing issued, no floor) takes the next second's floor plus
// the part of this second that has passed in units of 2^-32 s, every later
// one max(prev+1, this second's floor); seconds are clamped to [0, 2^32-1].
// Before 1970 there is no fraction, and from the cap's second on a first
// grant is the cap's floor, with no fraction.
func modelToken(prev uint64, now time.Time) uint64 {
	secs := min(max(now.Unix(), 0), math.MaxUint32)
	if prev == 0 {
		switch {
		case now.Unix() < 0:
			return 1 << 32
		case secs == math.MaxUint32:
			return math.MaxUint32 << 32
		}
		// ns * 2^32 / 10^9 = ns * 2^23 / 5^9, rounded down.
		frac := uint64(now.Nanosecond()) * (1 << 23) / 1_953_125
		return uint64(secs+1)<<32 + frac
	}
	return max(prev+1, uint64(secs)<<32)
}

var modelNames = []string{"alpha", "beta", "gamma", "delta"}

// grant records a grant in the model and checks the table issued the same
// token, and that it is above every token seen before.
func (m *model) grant(t *rapid.T, mc *mclaim) {
	m.last = modelToken(m.last, m.now)
	mc.token = m.last
	if got := mc.c.Token(); got != mc.token {
		t.Fatalf("claim %d granted token %#x, model says %#x", mc.id, got, mc.token)
	}
	if mc.token <= m.observed {
		t.Fatalf("token %#x not above previous %#x", mc.token, m.observed)
	}
	m.observed = mc.token
}

func (m *model) live() []*mclaim {
	var out []*mclaim
	for _, mc := range m.claims {
		if mc.name != "" {
			out = append(out, mc)
		}
	}
	return out
}

func TestTableMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tb := New[int]()
		m := &model{
			locks: map[string][]*mclaim{},
			now:   time.Unix(rapid.Int64Range(-1e9, 5e9).Draw(t, "start"), rapid.Int64Range(0, 999_999_999).Draw(t, "startNs")),
		}
		acquire := func(t *rapid.T, name string) {
			mc := &mclaim{c: &Claim[int]{Value: len(m.claims)}, id: len(m.claims), name: name}
			m.claims = append(m.claims, mc)
			q, busy := m.locks[name]
			m.locks[name] = append(q, mc)
			granted := tb.Acquire(mc.c, name, m.now)
			if granted == busy {
				t.Fatalf("Acquire(%q) granted=%v with the lock busy=%v", name, granted, busy)
			}
			if granted {
				m.grant(t, mc)
			}
		}
		release := func(t *rapid.T) {
			live := m.live()
			if len(live) == 0 {
				t.Skip("no live claim")
			}
			mc := rapid.SampledFrom(live).Draw(t, "claim")
			q := m.locks[mc.name]
			i := slices.Index(q, mc)
			q = slices.Delete(q, i, i+1)
			var want *mclaim
			if i == 0 && len(q) > 0 {
				want = q[0]
			}
			if len(q) == 0 {
				delete(m.locks, mc.name)
			} else {
				m.locks[mc.name] = q
			}
			mc.name, mc.token = "", 0
			got := tb.Release(mc.c, m.now)
			if want == nil {
				if got != nil {
					t.Fatalf("Release of claim %d promoted %v, want nobody", mc.id, valueOf(got))
				}
				return
			}
			if got != want.c {
				t.Fatalf("Release of claim %d promoted %v, want %d", mc.id, valueOf(got), want.id)
			}
			m.grant(t, want)
		}
		t.Repeat(map[string]func(*rapid.T){
			// Acquire and release are listed several times to weight them
			// over clock moves, so queues get long enough to be interesting.
			"acquire1": func(t *rapid.T) { acquire(t, rapid.SampledFrom(modelNames).Draw(t, "name")) },
			"acquire2": func(t *rapid.T) { acquire(t, rapid.SampledFrom(modelNames).Draw(t, "name")) },
			"acquireBurst": func(t *rapid.T) {
				name := rapid.SampledFrom(modelNames).Draw(t, "name")
				for range rapid.IntRange(2, 12).Draw(t, "n") {
					acquire(t, name)
					m.check(t, tb)
				}
			},
			"release1": release,
			"release2": release,
			"release3": release,
			"releaseIdle": func(t *rapid.T) {
				c := &Claim[int]{}
				var idle []*mclaim
				for _, mc := range m.claims {
					if mc.name == "" {
						idle = append(idle, mc)
					}
				}
				if len(idle) > 0 && rapid.Bool().Draw(t, "old") {
					c = rapid.SampledFrom(idle).Draw(t, "claim").c
				}
				if got := tb.Release(c, m.now); got != nil {
					t.Fatalf("Release of an idle claim returned %v", got.Value)
				}
			},
			"tick": func(t *rapid.T) {
				m.now = m.now.Add(time.Duration(rapid.Int64Range(0, 3e9).Draw(t, "forward")))
			},
			"stepBack": func(t *rapid.T) {
				m.now = m.now.Add(-time.Duration(rapid.Int64Range(1, 3600e9).Draw(t, "back")))
			},
			"jump": func(t *rapid.T) {
				// Anywhere from before 1970 to past the 2106 cap, at any
				// instant of the second.
				m.now = time.Unix(rapid.Int64Range(-1e10, 1e10).Draw(t, "to"), rapid.Int64Range(0, 999_999_999).Draw(t, "toNs"))
			},
			"setLastToken": func(t *rapid.T) {
				tok := rapid.Uint64Range(0, 1<<63).Draw(t, "floor")
				tb.SetLastToken(tok)
				m.last = max(m.last, tok)
			},
			"": func(t *rapid.T) { m.check(t, tb) },
		})
	})
}

// check compares everything observable, plus the table's internal links.
func (m *model) check(t *rapid.T, tb *Table[int]) {
	waiting := 0
	for _, name := range modelNames {
		q := m.locks[name]
		var wantHolder *Claim[int]
		var wantQueue []*Claim[int]
		if len(q) > 0 {
			wantHolder = q[0].c
			for _, mc := range q[1:] {
				wantQueue = append(wantQueue, mc.c)
			}
			waiting += len(q) - 1
		}
		if got := tb.Holder(name); got != wantHolder {
			t.Fatalf("Holder(%q) = %p, want %p", name, got, wantHolder)
		}
		if got := slices.Collect(tb.Waiters(name)); !slices.Equal(got, wantQueue) {
			t.Fatalf("Waiters(%q) = %v, want %v", name, ids(got), ids(wantQueue))
		}
		if got := tb.QueueLen(name); got != len(wantQueue) {
			t.Fatalf("QueueLen(%q) = %d, want %d", name, got, len(wantQueue))
		}
	}
	seen := map[string]bool{}
	for name, h := range tb.Locks() {
		q := m.locks[name]
		if seen[name] || len(q) == 0 || q[0].c != h {
			t.Fatalf("Locks yields %q -> %p; model has %d claims on it (seen before: %v)", name, h, len(q), seen[name])
		}
		seen[name] = true
	}
	if len(seen) != len(m.locks) {
		t.Fatalf("Locks yields %d locks, model has %d", len(seen), len(m.locks))
	}
	if tb.Len() != len(m.locks) || tb.Held() != len(m.locks) || tb.Waiting() != waiting {
		t.Fatalf("Len/Held/Waiting = %d/%d/%d, want %d/%d/%d",
			tb.Len(), tb.Held(), tb.Waiting(), len(m.locks), len(m.locks), waiting)
	}
	if tb.LastToken() != m.last {
		t.Fatalf("LastToken = %#x, model %#x", tb.LastToken(), m.last)
	}
	for _, mc := range m.claims {
		want := Idle
		if q := m.locks[mc.name]; len(q) > 0 {
			want = Waiting
			if q[0] == mc {
				want = Holding
			}
		}
		c := mc.c
		if c.State() != want || c.Token() != mc.token || c.Name() != mc.name || c.Value != mc.id {
			t.Fatalf("claim %d: %v token %#x name %q value %v; want %v %#x %q %d",
				mc.id, c.State(), c.Token(), c.Name(), c.Value, want, mc.token, mc.name, mc.id)
		}
	}
	if err := tb.checkLinks(); err != nil {
		t.Fatal(err)
	}
}

// checkLinks verifies the invariants Waiters cannot see: back links, tails,
// queue lengths, and the free list bound.
func (t *Table[T]) checkLinks() error {
	for name, lk := range t.locks {
		if lk.name != name || lk.holder == nil || lk.holder.lock != lk ||
			lk.holder.prev != nil || lk.holder.next != nil {
			return fmt.Errorf("lock %q: bad header", name)
		}
		n := 0
		var prev *Claim[T]
		for c := lk.q.head; c != nil; c = c.next {
			if c.prev != prev || c.lock != lk || c.state != Waiting || c.token != 0 {
				return fmt.Errorf("lock %q: waiter %d badly linked", name, n)
			}
			prev = c
			n++
		}
		if lk.q.tail != prev || lk.q.len != n {
			return fmt.Errorf("lock %q: tail/len wrong (len %d, counted %d)", name, lk.q.len, n)
		}
	}
	for n, lk := range t.free {
		if lk.holder != nil || lk.q != (queue[T]{}) || lk.name != "" {
			return fmt.Errorf("free lock %d not clean", n)
		}
	}
	if len(t.free) > maxFree {
		return fmt.Errorf("free list has %d, max %d", len(t.free), maxFree)
	}
	return nil
}

func ids(cs []*Claim[int]) []int {
	out := make([]int, len(cs))
	for i, c := range cs {
		out[i] = c.Value
	}
	return out
}

// valueOf is c.Value, or -1 for a nil claim, for failure messages.
func valueOf(c *Claim[int]) int {
	if c == nil {
		return -1
	}
	return c.Value
}

// TestNextTokenMatchesModel checks NextToken against modelToken directly,
// with seconds drawn near 1970 and near the cap as well as anywhere: a
// table in TestTableMatchesModel makes one first grant, rarely at those edges.
func TestNextTokenMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		secs := rapid.OneOf(
			rapid.Int64Range(-3, 3),
			rapid.Int64Range(math.MaxUint32-3, math.MaxUint32+3),
			rapid.Int64Range(-1e10, 1e10),
		).Draw(t, "secs")
		now := time.Unix(secs, rapid.Int64Range(0, 999_999_999).Draw(t, "ns"))
		prev := rapid.OneOf(rapid.Just(uint64(0)), rapid.Uint64Range(1, math.MaxUint64-1)).Draw(t, "prev")
		if got, want := NextToken(prev, now), modelToken(prev, now); got != want {
			t.Fatalf("NextToken(%#x, %v) = %#x, model says %#x", prev, now, got, want)
		}
	})
}
