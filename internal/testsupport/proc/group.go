package proc

import (
	"sync"
	"testing"
)

// Group is the processes one owner started, so that it can stop those still
// running at once: a harness on an interrupt or at its end, a test when it
// ends. Its owner makes it and names it in Options.Group; the package keeps
// no list of its own. The zero value is an empty group.
type Group struct {
	mu   sync.Mutex
	live map[*Process]struct{}
}

// NewGroupT returns a group whose processes still running are stopped when
// t ends.
func NewGroupT(t testing.TB) *Group {
	g := &Group{}
	t.Cleanup(g.StopAll)
	return g
}

func (g *Group) add(p *Process) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.live == nil {
		g.live = map[*Process]struct{}{}
	}
	g.live[p] = struct{}{}
}

func (g *Group) remove(p *Process) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.live, p)
}

// Len is how many of the group's processes have not been stopped, killed
// or seen to exit by Stop or Kill.
func (g *Group) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.live)
}

// StopAll stops every process of the group that is still running (see
// Process.Stop), one after another.
func (g *Group) StopAll() {
	g.mu.Lock()
	ps := make([]*Process, 0, len(g.live))
	for p := range g.live {
		ps = append(ps, p)
	}
	g.mu.Unlock()
	for _, p := range ps {
		_ = p.Stop()
	}
}
