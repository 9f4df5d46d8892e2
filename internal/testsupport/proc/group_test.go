package proc

import (
	"testing"
	"time"
)

// TestGroupStopsWhatItHolds: StopAll stops every process of the group still
// running; a process stopped on its own leaves the group, and a process
// started without the group is not its to stop.
func TestGroupStopsWhatItHolds(t *testing.T) {
	g := &Group{}
	start := func(o Options) *Process {
		t.Helper()
		o.Args = []string{"-c", "exec sleep 30"}
		o.StopGrace = 5 * time.Second
		p, err := Start("/bin/sh", o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Kill)
		return p
	}
	first, second, stoppedAlone := start(Options{Group: g}), start(Options{Group: g}), start(Options{Group: g})
	outside := start(Options{})
	if g.Len() != 3 {
		t.Fatalf("the group holds %d processes after three starts", g.Len())
	}
	_ = stoppedAlone.Stop()
	if g.Len() != 2 {
		t.Fatalf("the group holds %d processes after one of three stopped on its own, want 2", g.Len())
	}
	g.StopAll()
	if first.Alive() || second.Alive() || g.Len() != 0 {
		t.Errorf("after StopAll: first alive %v, second alive %v, the group holds %d", first.Alive(), second.Alive(), g.Len())
	}
	if !outside.Alive() {
		t.Error("StopAll stopped a process started without the group")
	}
}

// TestNewGroupTStopsAtTheEnd: the processes of NewGroupT's group are
// stopped when the test that made it ends.
func TestNewGroupTStopsAtTheEnd(t *testing.T) {
	var p *Process
	t.Run("owner", func(t *testing.T) {
		var err error
		p, err = Start("/bin/sh", Options{Args: []string{"-c", "exec sleep 30"}, StopGrace: 5 * time.Second, Group: NewGroupT(t)})
		if err != nil {
			t.Fatal(err)
		}
	})
	if p == nil {
		t.FailNow()
	}
	t.Cleanup(p.Kill)
	if p.Alive() {
		t.Error("the process outlived the test whose group held it")
	}
}
