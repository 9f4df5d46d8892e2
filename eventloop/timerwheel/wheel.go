// Package timerwheel is a hashed timer wheel for very many timers that are
// re-armed far more often than they fire.
//
// Every session of the server has one timer. Scheduling, re-scheduling and
// stopping are O(1) and allocate nothing, because the Timer is intrusive: the
// caller embeds it and the wheel links it into a slot. The wheel reads no clock;
// its owner passes the time in, so it is as deterministic as its inputs.
//
// A timer never fires early: a deadline is rounded up to the next tick, and a
// tick is processed only once the time passed to Advance has reached it.
package timerwheel

import (
	"math"
	"math/bits"
	"time"
)

// Timer is one entry; T is what the owner keeps in it (the server keeps a
// pointer to the session, so the timer costs 8 bytes for it, not an
// interface's 16). The zero value is a stopped timer.
type Timer[T any] struct {
	// Value is the owner's; the wheel never reads it.
	Value T

	prev, next *Timer[T]
	tick       int64 // the tick at which the timer fires
	armed      bool
	due        bool // collected by the running Advance and not yet fired
}

// Armed reports whether the timer is scheduled.
func (t *Timer[T]) Armed() bool { return t.armed }

// Wheel holds timers in a ring of slots, one tick wide each. Timers further
// away than one turn of the ring stay in their slot for later turns, so the
// ring's size bounds nothing but the work per tick.
type Wheel[T any] struct {
	tick  time.Duration
	slots []Timer[T] // sentinel heads of circular lists
	mask  int64
	// occupied has one bit per slot, set while the slot holds a timer, so
	// NextDue finds the next busy slot 64 slots at a time.
	occupied []uint64
	next     int64 // the next tick Advance processes
	len      int
	due      []*Timer[T] // reused by Advance
}

// New returns a wheel of the given tick width and number of slots (rounded up
// to a power of two), whose clock starts at zero.
func New[T any](tick time.Duration, slots int) *Wheel[T] {
	if tick <= 0 {
		panic("timerwheel: tick must be positive")
	}
	n := 1
	for n < slots {
		n <<= 1
	}
	w := &Wheel[T]{tick: tick, slots: make([]Timer[T], n), mask: int64(n - 1), occupied: make([]uint64, (n+63)/64)}
	for i := range w.slots {
		head := &w.slots[i]
		head.prev, head.next = head, head
	}
	return w
}

// Len returns the number of armed timers.
func (w *Wheel[T]) Len() int { return w.len }

// Tick returns the wheel's resolution.
func (w *Wheel[T]) Tick() time.Duration { return w.tick }

// Schedule arms t to fire at the first Advance whose time is at or after at,
// re-arming it if it was armed. A deadline already in the past fires at the
// next Advance.
func (w *Wheel[T]) Schedule(t *Timer[T], at time.Duration) {
	t.due = false
	if t.armed {
		w.unlink(t)
	}
	tick := int64(at / w.tick) // rounded up without computing at+w.tick-1, which overflows near math.MaxInt64
	if at%w.tick > 0 {
		tick++
	}
	if tick < w.next {
		tick = w.next
	}
	t.tick = tick
	slot := tick & w.mask
	w.occupied[slot>>6] |= 1 << (slot & 63)
	head := &w.slots[slot]
	t.prev, t.next = head.prev, head
	head.prev.next = t
	head.prev = t
	t.armed = true
	w.len++
}

// Deadline returns the time at which an armed timer fires (rounded up to a
// tick), and false for a stopped one.
func (w *Wheel[T]) Deadline(t *Timer[T]) (time.Duration, bool) {
	if !t.armed {
		return 0, false
	}
	if t.tick > int64(math.MaxInt64/w.tick) { // beyond any time Advance can reach
		return math.MaxInt64, true
	}
	return time.Duration(t.tick) * w.tick, true
}

// Stop disarms t. Stopping a stopped timer does nothing.
func (w *Wheel[T]) Stop(t *Timer[T]) {
	t.due = false
	if t.armed {
		w.unlink(t)
	}
}

func (w *Wheel[T]) unlink(t *Timer[T]) {
	t.prev.next = t.next
	t.next.prev = t.prev
	if slot := t.tick & w.mask; w.slots[slot].next == &w.slots[slot] {
		w.occupied[slot>>6] &^= 1 << (slot & 63)
	}
	t.prev, t.next = nil, nil
	t.armed = false
	w.len--
}

// Advance moves the wheel's clock to now and calls fire for every timer whose
// deadline has been reached. Each timer is disarmed before fire sees it, so
// fire may re-schedule it and schedule or stop others: a due timer that an
// earlier callback stopped or re-armed is not fired. Timers scheduled during
// Advance for a time already reached fire at the next Advance.
func (w *Wheel[T]) Advance(now time.Duration, fire func(*Timer[T])) {
	last := int64(now / w.tick)
	if now < 0 || last < w.next { // now/w.tick rounds -tick < now < 0 up to tick 0
		return
	}
	// Collect first and fire afterwards, so callbacks never see a slot that is
	// being walked. A jump of more than one turn visits every slot once.
	span := last - w.next + 1
	if span > int64(len(w.slots)) {
		span = int64(len(w.slots))
	}
	due := w.due[:0]
	for i := int64(0); i < span; i++ {
		head := &w.slots[(w.next+i)&w.mask]
		for t := head.next; t != head; {
			following := t.next
			if t.tick <= last {
				w.unlink(t)
				t.due = true
				due = append(due, t)
			}
			t = following
		}
	}
	w.next = last + 1
	for i, t := range due {
		due[i] = nil
		if t.due { // not stopped or re-armed by an earlier callback
			t.due = false
			fire(t)
		}
	}
	w.due = due[:0]
}

// NextDue returns the start of the first slot, from the wheel's clock on,
// that holds a timer, and false when no timer is armed. That is never later
// than the earliest deadline, so a caller that sleeps until then and calls
// Advance makes no timer late; it may be earlier (the slot's timers can be a
// turn or more away), and then Advance fires nothing. A server with few or
// distant timers can sleep instead of ticking.
func (w *Wheel[T]) NextDue() (time.Duration, bool) {
	if w.len == 0 {
		return 0, false
	}
	n := int64(len(w.slots))
	for i := int64(0); i < n; {
		slot := (w.next + i) & w.mask
		span := min(64-slot&63, n-slot) // to the end of the word or of the ring
		word := w.occupied[slot>>6] >> (slot & 63)
		if span < 64 {
			word &= 1<<span - 1
		}
		if word != 0 {
			return time.Duration(w.next+i+int64(bits.TrailingZeros64(word))) * w.tick, true
		}
		i += span
	}
	return time.Duration(w.next) * w.tick, true // unreachable while len > 0
}
