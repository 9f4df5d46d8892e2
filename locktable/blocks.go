package locktable

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Tokens from blocks: the rule of a server that is one node of a cluster
// led through etcd. The leader reserves a block of tokens [lo, hi) in etcd
// before it issues any of them, hands the block to its Table (AddBlock),
// and issues tokens only from blocks handed in; the clock is never read for
// a token. Blocks only grow: each starts above the ceiling stored in etcd,
// the largest token any leader ever reserved, so a new leader's tokens are
// above every token of every earlier one whatever the clocks do.
//
// A grant that finds no token left waits (the claim is Pending) until the
// next block is handed in (Resume); so that this never happens in steady
// state, the Table asks for the next block (WantsBlock) once half of the
// current one is used.

// BlockSize is how many tokens a block holds: about a million grants.
const BlockSize = 1 << 20

// ErrTokensExhausted says that no token is left above the stored ceiling.
var ErrTokensExhausted = errors.New("locktable: fencing-token space exhausted: the stored ceiling is at 2^64-1")

// NextBlock returns the block [lo, hi) to reserve above ceiling, the largest
// token ever reserved (0 for none); the caller stores hi-1 as the new
// ceiling. A term's first block also starts above the clock rule's token for
// now (unixSeconds(now) << 32, see NextToken), so that a cluster moved from
// clock tokens never goes back; later blocks follow the ceiling and never
// read the clock. The token 2^64-1 is never issued.
func NextBlock(ceiling uint64, now time.Time, first bool) (lo, hi uint64, err error) {
	base := ceiling
	if first {
		base = max(base, unixSeconds(now)<<32)
	}
	if base >= math.MaxUint64-1 {
		return 0, 0, ErrTokensExhausted
	}
	lo = base + 1
	hi = math.MaxUint64
	if lo <= math.MaxUint64-BlockSize {
		hi = lo + BlockSize
	}
	return lo, hi, nil
}

// blockSource is a Table's tokens in block mode: the block in use and at
// most one more, reserved ahead.
type blockSource struct {
	next, end uint64 // the block in use: tokens [next, end); next == end: none left
	size      uint64 // the size of the block in use, for "half used"
	qlo, qhi  uint64 // the block reserved ahead; qlo == qhi: none
	top       uint64 // the largest end handed in
}

// take issues the next token, moving to the block reserved ahead when the
// one in use is spent.
func (b *blockSource) take() (uint64, bool) {
	if b.next == b.end {
		if b.qlo == b.qhi {
			return 0, false
		}
		b.next, b.end, b.size = b.qlo, b.qhi, b.qhi-b.qlo
		b.qlo, b.qhi = 0, 0
	}
	tok := b.next
	b.next++
	return tok, true
}

// left reports whether a token can be issued.
func (b *blockSource) left() bool { return b.next != b.end || b.qlo != b.qhi }

// wants reports whether the next block should be reserved: none is reserved
// ahead, and at most half of the block in use is left (none at all before
// the first block).
func (b *blockSource) wants() bool {
	return b.qlo == b.qhi && (b.end-b.next)*2 <= b.size
}

// UseBlocks switches t to tokens from blocks: from now on it issues tokens
// only from blocks handed in with AddBlock. mayIssue, if not nil, is asked
// before a claim is issued a token; when it says no, the claim waits
// (Pending) until a Resume finds that it may. The event loop uses it for
// leases longer than the largest stored in etcd (the new leader's wait).
// Call it before the first grant.
func (t *Table[T]) UseBlocks(mayIssue func(*Claim[T]) bool) {
	t.blocks = &blockSource{}
	t.mayIssue = mayIssue
}

// AddBlock hands t the block of tokens [lo, hi), reserved in etcd. It must
// lie above every token issued and every block handed in before, and at
// most one block may wait beside the one in use.
func (t *Table[T]) AddBlock(lo, hi uint64) error {
	b := t.blocks
	switch {
	case b == nil:
		return errors.New("locktable: AddBlock on a table that takes its tokens from the clock")
	case lo == 0 || hi <= lo:
		return fmt.Errorf("locktable: token block [%d, %d) is empty or starts at 0", lo, hi)
	case lo <= t.last || lo < b.top:
		return fmt.Errorf("locktable: token block [%d, %d) is not above the tokens issued (last %d) and the blocks handed in (up to %d)", lo, hi, t.last, b.top)
	case b.qlo != b.qhi:
		return fmt.Errorf("locktable: token block [%d, %d) handed in while [%d, %d) still waits unused", lo, hi, b.qlo, b.qhi)
	}
	if b.next == b.end {
		b.next, b.end, b.size = lo, hi, hi-lo
	} else {
		b.qlo, b.qhi = lo, hi
	}
	b.top = hi
	return nil
}

// DropBlocks forgets every block handed in: no token is issued until the
// next AddBlock. A term ends with it, so that no token of a reservation
// made in an earlier term is ever issued.
func (t *Table[T]) DropBlocks() {
	if t.blocks != nil {
		t.blocks = &blockSource{top: t.blocks.top}
	}
}

// WantsBlock reports whether t takes tokens from blocks and the next block
// should be reserved now (see blockSource.wants).
func (t *Table[T]) WantsBlock() bool { return t.blocks != nil && t.blocks.wants() }

// HasTokens reports whether t can issue a token now: always with tokens
// from the clock, in block mode while a block handed in has one left.
func (t *Table[T]) HasTokens() bool { return t.blocks == nil || t.blocks.left() }

// Pending returns the number of claims that hold their lock's place but
// wait for a token (or for mayIssue).
func (t *Table[T]) Pending() int { return t.pending.len }

// Resume issues tokens to the Pending claims that may have one now, in the
// order they began to wait, as long as tokens last, and calls granted for
// each (it must not change t). A claim that mayIssue still refuses keeps
// waiting; the claims behind it are not held up, since they are on other
// locks.
func (t *Table[T]) Resume(granted func(*Claim[T])) {
	for c := t.pending.head; c != nil && t.blocks.left(); {
		next := c.next
		if tok, ok := t.issue(c, time.Time{}); ok {
			t.pending.remove(c)
			t.waiting--
			t.grant(c.lock, c, tok)
			granted(c)
		}
		c = next
	}
}

// issue returns the token for a grant to c now, or false when c must wait
// for one: in block mode when no token is left or mayIssue says no. It
// changes nothing but the block in use.
func (t *Table[T]) issue(c *Claim[T], now time.Time) (uint64, bool) {
	if t.blocks == nil {
		return NextToken(t.last, now), true
	}
	if t.mayIssue != nil && !t.mayIssue(c) {
		return 0, false
	}
	return t.blocks.take()
}

// hold makes c the holder-to-be of lk without a token: Pending, counted as
// a waiter, linked at the back of the pending claims.
func (t *Table[T]) hold(lk *lock[T], c *Claim[T]) {
	lk.holder = c
	c.lock = lk
	c.state = Pending
	t.pending.pushBack(c)
	t.waiting++
}
