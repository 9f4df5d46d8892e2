package gocronlock

import (
	"context"
	"fmt"
	"sync"

	"github.com/monolock/monolock/client"
)

// Elector is a gocron.Elector: the scheduler whose Elector holds the named
// lock is the leader and runs the jobs (see the package documentation).
type Elector struct {
	svc  service
	cfg  config
	name string

	cancel context.CancelFunc
	done   chan struct{} // closed when the campaign has ended

	mu     sync.Mutex
	leader Hold // the zero Hold when not leader
}

// NewElector starts campaigning for the lock name with c's server and
// returns once the server has answered the first attempt: the elector is
// then leader or queued. It returns the first attempt's error (an invalid
// name, a server it cannot reach within WithTimeout); after that it keeps
// campaigning in the background, retrying failed attempts with backoff,
// until Close or the end of ctx, which give up leadership. Pass it to
// gocron.WithDistributedElector.
func NewElector(ctx context.Context, c *client.Client, name string, opts ...Option) (*Elector, error) {
	return newElector(ctx, clientService{c}, name, newConfig(opts))
}

func newElector(ctx context.Context, svc service, name string, cfg config) (*Elector, error) {
	ctx, cancel := context.WithCancel(ctx)
	e := &Elector{svc: svc, cfg: cfg, name: name, cancel: cancel, done: make(chan struct{})}
	first, err := e.enqueue(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	go e.campaign(ctx, first)
	return e, nil
}

func (e *Elector) enqueue(ctx context.Context) (heldLock, error) {
	actx, cancel := context.WithTimeout(ctx, e.cfg.timeout)
	defer cancel()
	lk, err := e.svc.Enqueue(actx, e.name, e.cfg.lease)
	if err != nil {
		return nil, fmt.Errorf("gocronlock: campaign for leadership lock %q: %w", e.name, err)
	}
	return lk, nil
}

// campaign holds lk, then queues again, until ctx ends.
func (e *Elector) campaign(ctx context.Context, lk heldLock) {
	defer close(e.done)
	backoff := retryFirst
	var err error // the last attempt's
	for {
		if lk != nil && e.hold(ctx, lk) {
			backoff = retryFirst // led: queue again at once
		} else if ctx.Err() == nil {
			// The attempt failed, or its connection ended while queued:
			// wait before the next, so that a server that refuses or
			// drops every connection is not asked in a tight loop.
			if err != nil {
				e.cfg.log("gocronlock: campaign attempt failed; retrying", "lock", e.name, "retry_in", backoff, "err", err)
			}
			select {
			case <-e.cfg.clock.After(backoff):
			case <-ctx.Done():
			}
			backoff = min(2*backoff, retryMax)
		}
		if ctx.Err() != nil {
			return
		}
		lk, err = e.enqueue(ctx)
	}
}

// hold waits for lk's grant, leads while it is held, and closes it. It
// reports whether lk was granted.
func (e *Elector) hold(ctx context.Context, lk heldLock) bool {
	select {
	case <-lk.Granted():
	case <-lk.Lost():
		_ = lk.Close() // lost while queued: Close returns the same cause
		e.cfg.log("gocronlock: the leadership lock's queue was left; queueing again", "lock", e.name, "err", lk.Err())
		return false
	case <-ctx.Done():
		_ = lk.Close()
		return false
	}
	token := lk.Token()
	e.mu.Lock()
	e.leader = Hold{lock: lk, name: e.name}
	e.mu.Unlock()
	e.cfg.log("gocronlock: leader", "lock", e.name, "token", token)
	e.notify(Change{Leader: true, Token: token})

	var cause error
	select {
	case <-lk.Lost():
		cause = lk.Err()
	case <-ctx.Done():
		cause = ErrClosed
	}
	e.mu.Lock()
	e.leader = Hold{}
	e.mu.Unlock()
	_ = lk.Close() // releases after Close; after a loss it returns the cause again
	e.cfg.log("gocronlock: no longer leader", "lock", e.name, "token", token, "cause", cause)
	e.notify(Change{Token: token, Cause: cause})
	return true
}

func (e *Elector) notify(c Change) {
	if e.cfg.onChange != nil {
		e.cfg.onChange(c)
	}
}

// IsLeader returns nil while this elector holds the leadership lock and its
// ownership is confirmed (client.Lock.Valid, which reads the clock itself:
// a leader resuming from a pause past its lease is no longer leader at its
// first check), and an error wrapping ErrNotLeader otherwise.
func (e *Elector) IsLeader(context.Context) error {
	if e.Held().Valid() {
		return nil
	}
	return fmt.Errorf("%w: another scheduler holds lock %q, or this one lost it", ErrNotLeader, e.name)
}

// Held is the leadership lock's Hold while this elector leads (its Token
// fences the jobs' writes), the zero Hold otherwise.
func (e *Elector) Held() Hold {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.leader
}

// Close gives up leadership (releasing the lock) or leaves the queue, and
// stops campaigning. It returns once the lock is closed; later calls do
// nothing.
func (e *Elector) Close() error {
	e.cancel()
	<-e.done
	return nil
}
