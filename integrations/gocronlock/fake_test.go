package gocronlock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/monolock/monolock/client"
)

// fakeServer is the lock table of a monolock server in memory, behind the
// service interface: one holder per name, a FIFO queue, tokens from one
// increasing sequence. Several lockers or electors share one, as the
// schedulers of a fleet share a server.
type fakeServer struct {
	mu      sync.Mutex
	last    uint64
	holder  map[string]*fakeLock
	queue   map[string][]*fakeLock
	fail    error           // when set, every attempt fails with it
	calls   []fakeCall      // every attempt, in order
	attempt chan string     // receives the name of every attempt
	leases  []time.Duration // the lease of every attempt
}

type fakeCall struct {
	name        string
	hasDeadline bool
}

func newFakeServer() *fakeServer {
	return &fakeServer{holder: map[string]*fakeLock{}, queue: map[string][]*fakeLock{}, attempt: make(chan string, 100)}
}

// fakeLock is one connection's claim.
type fakeLock struct {
	srv     *fakeServer
	name    string
	token   atomic.Uint64
	valid   atomic.Bool
	granted chan struct{}
	lost    chan struct{}
	once    sync.Once
	err     error // set before lost is closed
	closed  atomic.Bool
}

func (s *fakeServer) record(ctx context.Context, name string, lease time.Duration) error {
	_, ok := ctx.Deadline()
	s.mu.Lock()
	s.calls = append(s.calls, fakeCall{name, ok})
	s.leases = append(s.leases, lease)
	fail := s.fail
	s.mu.Unlock()
	s.attempt <- name
	return fail
}

func (s *fakeServer) TryAcquire(ctx context.Context, name string, lease time.Duration) (heldLock, error) {
	if err := s.record(ctx, name, lease); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holder[name] != nil {
		return nil, client.ErrBusy
	}
	return s.grantLocked(s.newLock(name)), nil
}

func (s *fakeServer) Enqueue(ctx context.Context, name string, lease time.Duration) (heldLock, error) {
	if err := s.record(ctx, name, lease); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.newLock(name)
	if s.holder[name] != nil {
		s.queue[name] = append(s.queue[name], l)
		return l, nil
	}
	return s.grantLocked(l), nil
}

func (s *fakeServer) newLock(name string) *fakeLock {
	return &fakeLock{srv: s, name: name, granted: make(chan struct{}), lost: make(chan struct{})}
}

func (s *fakeServer) grantLocked(l *fakeLock) *fakeLock {
	s.last++
	l.token.Store(s.last)
	l.valid.Store(true)
	s.holder[l.name] = l
	close(l.granted)
	return l
}

// dropLocked takes l out of the table and grants its lock to the next in
// the queue when l held it.
func (s *fakeServer) dropLocked(l *fakeLock) {
	q := s.queue[l.name]
	for i, w := range q {
		if w == l {
			s.queue[l.name] = append(q[:i:i], q[i+1:]...)
		}
	}
	if s.holder[l.name] != l {
		return
	}
	delete(s.holder, l.name)
	if q := s.queue[l.name]; len(q) > 0 {
		s.queue[l.name] = q[1:]
		s.grantLocked(q[0])
	}
}

// held is the holder of name, nil when it is free.
func (s *fakeServer) held(name string) *fakeLock {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.holder[name]
}

// expire is the lease running out on l's silent holder: the server hands
// the lock on, and the client finds the loss.
func (l *fakeLock) expire() {
	l.valid.Store(false)
	l.srv.mu.Lock()
	l.srv.dropLocked(l)
	l.srv.mu.Unlock()
	l.lose(client.ErrHeartbeatTimeout)
}

func (l *fakeLock) lose(err error) {
	l.once.Do(func() {
		l.valid.Store(false)
		l.err = err
		close(l.lost)
	})
}

func (l *fakeLock) Token() uint64            { return l.token.Load() }
func (l *fakeLock) Valid() bool              { return l.valid.Load() }
func (l *fakeLock) Granted() <-chan struct{} { return l.granted }
func (l *fakeLock) Lost() <-chan struct{}    { return l.lost }
func (l *fakeLock) Err() error {
	select {
	case <-l.lost:
		return l.err
	default:
		return nil
	}
}

// Close releases like the client's: the loss cause when lost before.
func (l *fakeLock) Close() error {
	var before error
	select {
	case <-l.lost:
		before = l.err
	default:
	}
	l.closed.Store(true)
	l.srv.mu.Lock()
	l.srv.dropLocked(l)
	l.srv.mu.Unlock()
	l.lose(client.ErrReleased)
	if errors.Is(before, client.ErrReleased) {
		return nil
	}
	return before
}
