package locktable_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/monolock/monolock/locktable"
)

func TestNextBlock(t *testing.T) {
	for _, c := range []struct {
		name    string
		ceiling uint64
		now     time.Time
		first   bool
		lo, hi  uint64
	}{
		{"a term's first block, nothing stored: above the clock rule", 0, t0, true, t0Floor + 1, t0Floor + 1 + locktable.BlockSize},
		{"a term's first block, a ceiling above the clock: above the ceiling", t0Floor + 5<<32, t0, true, t0Floor + 5<<32 + 1, t0Floor + 5<<32 + 1 + locktable.BlockSize},
		{"a term's first block, a ceiling below the clock: above the clock", 1000, t0, true, t0Floor + 1, t0Floor + 1 + locktable.BlockSize},
		{"a later block follows the ceiling, whatever the clock", 1000, t0, false, 1001, 1001 + locktable.BlockSize},
		{"a later block with the clock stepped back", t0Floor + 77, time.Unix(0, 0), false, t0Floor + 78, t0Floor + 78 + locktable.BlockSize},
		{"near the top: the block is cut short, 2^64-1 never issued", math.MaxUint64 - 10, t0, false, math.MaxUint64 - 9, math.MaxUint64},
	} {
		lo, hi, err := locktable.NextBlock(c.ceiling, c.now, c.first)
		if err != nil || lo != c.lo || hi != c.hi {
			t.Errorf("%s: NextBlock(%d, first=%v) = [%d, %d) %v, want [%d, %d)", c.name, c.ceiling, c.first, lo, hi, err, c.lo, c.hi)
		}
	}
	for _, ceiling := range []uint64{math.MaxUint64 - 1, math.MaxUint64} {
		if _, _, err := locktable.NextBlock(ceiling, t0, false); !errors.Is(err, locktable.ErrTokensExhausted) {
			t.Errorf("NextBlock(%d) = %v, want ErrTokensExhausted", ceiling, err)
		}
	}
}

// blockTable is a table in block mode whose mayIssue refuses the claims in
// refused.
func blockTable(refused map[*locktable.Claim[*session]]bool) *locktable.Table[*session] {
	tb := locktable.New[*session]()
	tb.UseBlocks(func(c *locktable.Claim[*session]) bool { return !refused[c] })
	return tb
}

func TestTokensOnlyFromBlocks(t *testing.T) {
	tb := blockTable(nil)
	if !tb.WantsBlock() {
		t.Fatal("a table without a block does not ask for one")
	}
	var c [6]locktable.Claim[*session]
	if tb.Acquire(&c[0], "a", t0) || c[0].State() != locktable.Pending || c[0].Token() != 0 {
		t.Fatalf("granted without a block: %v token %d", c[0].State(), c[0].Token())
	}
	checkPending(t, tb, 1, 1, 1)
	if err := tb.AddBlock(100, 104); err != nil {
		t.Fatal(err)
	}
	var got []uint64
	tb.Resume(func(cl *locktable.Claim[*session]) { got = append(got, cl.Token()) })
	if len(got) != 1 || got[0] != 100 || c[0].State() != locktable.Holding {
		t.Fatalf("Resume granted %v, state %v", got, c[0].State())
	}
	if tb.WantsBlock() {
		t.Fatal("asks for a block with three of four left")
	}
	tb.Acquire(&c[1], "b", t0)
	if !tb.WantsBlock() {
		t.Fatal("does not ask for a block at half use")
	}
	tb.Acquire(&c[2], "c", t0)
	tb.Acquire(&c[3], "d", t0)
	if c[3].Token() != 103 || tb.Acquire(&c[4], "e", t0) || c[4].State() != locktable.Pending {
		t.Fatalf("the block's last token %d; past it %v", c[3].Token(), c[4].State())
	}
	// A waiter whose turn comes when no token is left holds the place.
	tb.Acquire(&c[5], "a", t0)
	if tb.Release(&c[0], t0) != nil || c[5].State() != locktable.Pending || tb.Holder("a") != &c[5] {
		t.Fatalf("promoted without a token: %v", c[5].State())
	}
	checkPending(t, tb, 5, 2, 2)
	if err := tb.AddBlock(500, 504); err != nil {
		t.Fatal(err)
	}
	got = got[:0]
	tb.Resume(func(cl *locktable.Claim[*session]) { got = append(got, cl.Token()) })
	if len(got) != 2 || c[4].Token() != 500 || c[5].Token() != 501 {
		t.Fatalf("Resume issued %v, in the order the claims began to wait: want e 500, a 501", got)
	}
	checkPending(t, tb, 5, 0, 0)
}

func checkPending(t *testing.T, tb *locktable.Table[*session], locks, pending, waiting int) {
	t.Helper()
	if tb.Len() != locks || tb.Held() != locks-pending || tb.Pending() != pending || tb.Waiting() != waiting {
		t.Errorf("Len/Held/Pending/Waiting = %d/%d/%d/%d, want %d/%d/%d/%d",
			tb.Len(), tb.Held(), tb.Pending(), tb.Waiting(), locks, locks-pending, pending, waiting)
	}
}

func TestAddBlockRefusals(t *testing.T) {
	clock := locktable.New[*session]()
	if err := clock.AddBlock(1, 2); err == nil {
		t.Error("a clock table took a block")
	}
	tb := blockTable(nil)
	for _, b := range [][2]uint64{{0, 10}, {10, 10}, {11, 10}} {
		if err := tb.AddBlock(b[0], b[1]); err == nil {
			t.Errorf("took the empty block [%d, %d)", b[0], b[1])
		}
	}
	if err := tb.AddBlock(100, 104); err != nil {
		t.Fatal(err)
	}
	var c locktable.Claim[*session]
	tb.Acquire(&c, "a", t0)
	if err := tb.AddBlock(50, 60); err == nil {
		t.Error("took a block below the tokens issued")
	}
	if err := tb.AddBlock(200, 204); err != nil {
		t.Fatal(err)
	}
	if err := tb.AddBlock(300, 304); err == nil {
		t.Error("took a third block while one waits unused")
	}
	// A term's end drops every block: nothing is issued until the next
	// term's, which must lie above them all.
	tb.DropBlocks()
	var d locktable.Claim[*session]
	if tb.Acquire(&d, "b", t0) || d.Token() != 0 {
		t.Fatalf("issued %d from a dropped block", d.Token())
	}
	if err := tb.AddBlock(150, 160); err == nil {
		t.Error("took a block below one handed in before the drop")
	}
}

func TestPendingUntilMayIssue(t *testing.T) {
	var long, short, behind locktable.Claim[*session]
	refused := map[*locktable.Claim[*session]]bool{&long: true}
	tb := blockTable(refused)
	if err := tb.AddBlock(100, 200); err != nil {
		t.Fatal(err)
	}
	if tb.Acquire(&long, "a", t0) || long.State() != locktable.Pending {
		t.Fatalf("granted a claim mayIssue refuses: %v", long.State())
	}
	tb.Acquire(&behind, "a", t0) // waits behind it
	if !tb.Acquire(&short, "b", t0) || short.Token() != 100 {
		t.Fatalf("a claim on another lock waits too: %v %d", short.State(), short.Token())
	}
	tb.Resume(func(*locktable.Claim[*session]) { t.Fatal("Resume granted a refused claim") })
	delete(refused, &long)
	tb.Resume(func(*locktable.Claim[*session]) {})
	if long.Token() != 101 {
		t.Fatalf("token %d after mayIssue said yes", long.Token())
	}
	// A Pending claim released passes its place on.
	refused[&behind] = true
	var third locktable.Claim[*session]
	tb.Acquire(&third, "a", t0)
	tb.Release(&long, t0)
	if behind.State() != locktable.Pending || tb.Release(&behind, t0) != &third || third.Token() != 102 {
		t.Fatalf("behind %v, third %v %d", behind.State(), third.State(), third.Token())
	}
	checkPending(t, tb, 2, 0, 0)
}
