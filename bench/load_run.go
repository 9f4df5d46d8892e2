package main

import "time"

// benchBase is the zero of the harness's monotonic clock.
var benchBase = time.Now()

// mono is the harness's monotonic clock in ns; reactors share it.
func mono() int64 { return int64(time.Since(benchBase)) }

// starter is a workload that dials its first connections itself.
type starter interface {
	workload
	start(r *reactor)
}

// loadRun is a reactor running a workload on its own goroutine.
type loadRun struct {
	r    *reactor
	done chan struct{}
	err  error
}

// startLoad runs w against addr until it stops itself or Stop is called.
// Every socket is closed when the loop ends.
func startLoad(addr string, w starter) (*loadRun, error) {
	r, err := newReactor(addr, w, benchBase)
	if err != nil {
		return nil, err
	}
	l := &loadRun{r: r, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		w.start(r)
		l.err = r.run()
		r.closeAll()
	}()
	return l, nil
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
func runLoad(addr string, w starter) error {
	l, err := startLoad(addr, w)
	if err != nil {
		return err
	}
	return l.Wait()
}
