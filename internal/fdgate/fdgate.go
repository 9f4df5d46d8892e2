// Package fdgate gives the HTTP ports' accepts precedence over the lock
// port's at the process's descriptor limit.
//
// At the limit the lock port's accept loop closes connections to take their
// descriptors (see eventloop's accept.go) and takes each one within
// microseconds; an HTTP listener that has lost its spare descriptor retries
// every few milliseconds and would lose every race for one, so a probe
// would time out for as long as the lock port keeps evicting. With a Gate,
// such a listener says it wants a descriptor, and the lock port's accept
// loop, before accepting for itself, frees one for it and waits until the
// listener has taken it.
package fdgate

import (
	"sync/atomic"
	"time"
)

// Gate is shared by the lock port's accept loop and the HTTP listeners of
// one process. The zero value is not usable; make one with New.
type Gate struct {
	wanting atomic.Int32
	freed   chan struct{} // a descriptor was freed for a listener
	taken   chan struct{} // a listener that wanted one has accepted, or given up
}

// New returns a Gate.
func New() *Gate {
	return &Gate{freed: make(chan struct{}, 1), taken: make(chan struct{}, 1)}
}

// Want says that the caller, an HTTP listener, has a connection waiting and
// no descriptor to accept it with. Call the result once it has accepted or
// given up.
func (g *Gate) Want() (done func()) {
	g.wanting.Add(1)
	return func() {
		g.wanting.Add(-1)
		select {
		case g.taken <- struct{}{}:
		default:
		}
	}
}

// Freed is signalled when a descriptor was freed for a listener that wants
// one: it should accept at once.
func (g *Gate) Freed() <-chan struct{} { return g.freed }

// Wanted reports whether an HTTP listener waits for a descriptor.
func (g *Gate) Wanted() bool { return g.wanting.Load() > 0 }

// Yield is the lock port's side: it has just freed a descriptor while a
// listener wants one. Yield tells the listener and waits until it has
// accepted, at most timeout or until stop is closed, so that the lock port's
// next accept does not take the descriptor first.
func (g *Gate) Yield(timeout time.Duration, stop <-chan struct{}) {
	select { // a stale signal from an earlier yield must not end this one
	case <-g.taken:
	default:
	}
	if !g.Wanted() { // the listener took a descriptor on its own meanwhile
		return
	}
	select {
	case g.freed <- struct{}{}:
	default:
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-g.taken:
	case <-t.C:
	case <-stop:
	}
}
