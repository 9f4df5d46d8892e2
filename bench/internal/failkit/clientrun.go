package failkit

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/monolock/monolock/internal/testsupport/poll"
	"github.com/monolock/monolock/internal/testsupport/proc"
)

// ClientRun is one client process and the events it has written so far.
type ClientRun struct {
	child *proc.Child
	done  chan struct{} // the events are read to the end

	mu       sync.Mutex
	events   []Event
	answered map[int]time.Time // each client's last answer
	err      error
}

// StartClients runs self (the harness's executable) as the client process
// inside namespace ns, with RunClients's flags.
func StartClients(self, ns string, args ...string) (*ClientRun, error) {
	child, err := proc.StartChild(self, proc.ChildOptions{
		Name: "the client process", Netns: ns, Stderr: os.Stderr,
		Args: append([]string{ClientsCommand}, args...),
	})
	if err != nil {
		return nil, err
	}
	cr := &ClientRun{child: child, done: make(chan struct{}), answered: map[int]time.Time{}}
	go func() {
		defer close(cr.done)
		err := readEvents(child.Lines(), cr.add)
		<-child.Done()
		cr.mu.Lock()
		cr.err = errors.Join(err, child.Err())
		cr.mu.Unlock()
	}()
	return cr, nil
}

// readEvents parses the client process's lines, handing each event to f as
// it arrives, until the lines end.
func readEvents(lines <-chan proc.Line, f func(Event)) error {
	for l := range lines {
		var e Event
		if err := json.Unmarshal([]byte(l.Text), &e); err != nil {
			return fmt.Errorf("client output %q: %w", l.Text, err)
		}
		f(e)
	}
	return nil
}

// add records one event as it arrives.
func (cr *ClientRun) add(e Event) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	cr.events = append(cr.events, e)
	if e.Kind == "answered" {
		cr.answered[e.C] = time.Unix(0, e.At)
	}
}

// AnsweredSince counts the clients whose last answer came at or after t.
func (cr *ClientRun) AnsweredSince(t time.Time) int {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	n := 0
	for _, at := range cr.answered {
		if !at.Before(t) {
			n++
		}
	}
	return n
}

// Stop closes the process's stdin, which ends it, and returns its events.
// A nil ClientRun (none running) stops at once.
func (cr *ClientRun) Stop() ([]Event, error) {
	if cr == nil {
		return nil, nil
	}
	if err := cr.child.Close(20 * time.Second); errors.Is(err, proc.ErrKilled) {
		return nil, err
	}
	<-cr.done
	cr.mu.Lock()
	defer cr.mu.Unlock()
	if cr.err != nil {
		return nil, fmt.Errorf("client process: %w", cr.err)
	}
	return cr.events, nil
}

// Await polls cond until it holds or the timeout passes.
func Await(timeout time.Duration, what string, cond func() bool) error {
	return poll.Until(timeout, func() error {
		if !cond() {
			return fmt.Errorf("waiting for %s", what)
		}
		return nil
	})
}
