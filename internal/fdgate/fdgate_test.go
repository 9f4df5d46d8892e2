package fdgate

import (
	"testing"
	"time"
)

// forever stands for a timeout no test reaches: each case ends on an event.
const forever = time.Hour

// TestYieldWaitsUntilTheListenerHasAccepted: the lock port's Yield tells
// a listener that wants a descriptor, and returns once it has accepted.
func TestYieldWaitsUntilTheListenerHasAccepted(t *testing.T) {
	g := New()
	done := g.Want()
	if !g.Wanted() {
		t.Fatal("Wanted is false after Want")
	}
	accepted := make(chan struct{})
	go func() {
		<-g.Freed() // the listener wakes when a descriptor is freed for it
		close(accepted)
		done()
	}()
	g.Yield(forever, nil)
	select {
	case <-accepted:
	default:
		t.Fatal("Yield returned before the listener was told a descriptor was free")
	}
	if g.Wanted() {
		t.Fatal("Wanted is true after the listener's done")
	}
}

// TestYieldReturnsAtOnceWhenNobodyWants: a listener that took a descriptor
// on its own before Yield leaves no signal that would make the next Yield
// return early, and Yield does not wait for it.
func TestYieldReturnsAtOnceWhenNobodyWants(t *testing.T) {
	g := New()
	g.Want()() // wanted, then accepted on its own: a stale "taken"
	g.Yield(forever, nil)

	// The stale signal was drained: the next listener's Yield waits for it.
	done := g.Want()
	returned := make(chan struct{})
	go func() {
		g.Yield(forever, nil)
		close(returned)
	}()
	<-g.Freed()
	select {
	case <-returned:
		t.Fatal("Yield returned before the listener accepted")
	default:
	}
	done()
	<-returned
}

// TestYieldEndsWithStopOrTimeout: a listener that never takes its
// descriptor holds the lock port for at most the timeout, or until stop.
func TestYieldEndsWithStopOrTimeout(t *testing.T) {
	g := New()
	defer g.Want()()
	stop := make(chan struct{})
	close(stop)
	g.Yield(forever, stop)
	g.Yield(time.Nanosecond, nil)
}
