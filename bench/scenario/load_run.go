package scenario

import (
	"errors"
	"fmt"
	"github.com/monolock/monolock/bench/clock"
	"github.com/monolock/monolock/bench/reactor"
	"sync/atomic"
	"time"
)

// starter is a workload that dials its first connections itself.
type starter interface {
	reactor.Workload
	start(r *reactor.Reactor)
}

// loadRun is a reactor running a workload on its own goroutine.
type loadRun struct {
	r    *reactor.Reactor
	done chan struct{}
	err  error
}

// startLoad runs w against addr until it stops itself or Stop is called.
// Every socket is closed when the loop ends.
func startLoad(clk clock.Clock, addr string, w starter) (*loadRun, error) {
	r, err := reactor.New(addr, w, clk.Base())
	if err != nil {
		return nil, err
	}
	l := &loadRun{r: r, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		w.start(r)
		l.err = r.Run()
		r.CloseAll()
	}()
	return l, nil
}

// startLoadWhenReady starts w against addr and polls ready every poll until
// the load sets it (its connections are set up); it returns the run and the
// setup's wall time. The setup may take a minute plus a millisecond per
// connection (conns); past that it is an error saying notReady, and so is
// the load ending first.
func startLoadWhenReady(clk clock.Clock, addr string, w starter, ready *atomic.Bool, conns int, poll time.Duration, notReady string) (*loadRun, time.Duration, error) {
	t0 := time.Now()
	run, err := startLoad(clk, addr, w)
	if err != nil {
		return nil, 0, err
	}
	deadline := time.Now().Add(60*time.Second + time.Duration(conns)*time.Millisecond)
	for !ready.Load() {
		select {
		case <-run.done:
			return nil, 0, fmt.Errorf("the load ended during setup: %w", run.err)
		default:
		}
		if time.Now().After(deadline) {
			_ = run.Stop()
			return nil, 0, errors.New(notReady + " within the setup deadline")
		}
		time.Sleep(poll)
	}
	return run, time.Since(t0), nil
}

// Wait waits for the loop to end and returns its error.
func (l *loadRun) Wait() error {
	<-l.done
	return l.err
}

// Stop ends the loop and waits for it.
func (l *loadRun) Stop() error {
	l.r.Stop()
	return l.Wait()
}

// runLoad runs w to its end.
func runLoad(clk clock.Clock, addr string, w starter) error {
	l, err := startLoad(clk, addr, w)
	if err != nil {
		return err
	}
	return l.Wait()
}
