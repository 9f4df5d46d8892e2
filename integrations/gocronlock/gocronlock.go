package gocronlock

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/monolock/monolock/client"
)

// The defaults of the options.
const (
	DefaultLease   = 5 * time.Second
	DefaultSlot    = time.Second
	DefaultTimeout = client.DefaultConnectTimeout
	DefaultPrefix  = "gocron/"
)

// Backoff of the elector's campaign after a failed attempt.
const (
	retryFirst = 100 * time.Millisecond
	retryMax   = 5 * time.Second
)

// ErrRunTaken is wrapped by the Locker's error when another scheduler holds
// the run's lock: it runs or has run this tick, and this scheduler skips it.
var ErrRunTaken = errors.New("gocronlock: another scheduler has this run")

// ErrNotLeader is wrapped by IsLeader's error when this elector does not
// hold the leadership lock.
var ErrNotLeader = errors.New("gocronlock: not the leader")

// ErrClosed is the cause of a leadership given up by Close (or by the end
// of NewElector's context).
var ErrClosed = errors.New("gocronlock: elector closed")

// Option configures NewLocker or NewElector.
type Option func(*config)

type config struct {
	lease    time.Duration
	slot     time.Duration
	timeout  time.Duration
	prefix   string
	logger   *slog.Logger
	onChange func(Change)
	clock    clockwork.Clock
}

func newConfig(opts []Option) config {
	c := config{lease: DefaultLease, slot: DefaultSlot, timeout: DefaultTimeout, prefix: DefaultPrefix, clock: clockwork.NewRealClock()}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithLease sets the lease of every lock (DefaultLease when not set or not
// positive): how long the server keeps a lock whose holder has gone silent.
// It bounds how long a frozen leader keeps the others from leading, and how
// long a frozen run keeps its run's lock. The client heartbeats at a quarter
// of it; choose at least 2.5 times the worst round trip to the server.
func WithLease(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.lease = d
		}
	}
}

// WithSlot sets the Locker's slot (DefaultSlot when not set or not
// positive): the resolution of the jobs' schedules. A run's lock is named
// after the time it was due, truncated to the slot, and held until two
// slots after that; runs of one job must be at least one slot apart. The
// Elector ignores it.
func WithSlot(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.slot = d
		}
	}
}

// WithTimeout bounds one attempt to take a lock, the dial and the server's
// first answer (DefaultTimeout when not set or not positive).
func WithTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.timeout = d
		}
	}
}

// WithPrefix sets what the Locker puts in front of a job's name to make its
// lock names (DefaultPrefix). The Elector ignores it: its lock is the name
// it is given.
func WithPrefix(p string) Option { return func(c *config) { c.prefix = p } }

// WithLogger logs what happens away from the caller: a Locker's release at
// the end of a hold that finds the lock lost, an Elector's failed attempts
// and its leadership changes. Nothing is logged without it.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// OnChange has the Elector call f, on its own goroutine, when it becomes
// leader and when it stops being leader. The Locker ignores it.
func OnChange(f func(Change)) Option { return func(c *config) { c.onChange = f } }

// Change is a change of an Elector's leadership.
type Change struct {
	Leader bool
	// Token is the leadership lock's fencing token.
	Token uint64
	// Cause says why leadership ended (nil when Leader): the lock's loss
	// (client.ErrHeartbeatTimeout, client.ErrConnectionClosed, a
	// *client.ServerError...) or ErrClosed.
	Cause error
}

func (c config) log(msg string, args ...any) {
	if c.logger != nil {
		c.logger.Info(msg, args...)
	}
}

// Hold is a held monolock lock as a job sees it: the fencing token to send
// with each write, and Valid to check right before each side effect. The
// zero Hold holds nothing: its Token is 0 and Valid false.
type Hold struct {
	lock heldLock
	name string
	slot time.Time
}

// Token is the lock's fencing token (0 for the zero Hold).
func (h Hold) Token() uint64 {
	if h.lock == nil {
		return 0
	}
	return h.lock.Token()
}

// Valid reports whether the lock is still held and confirmed (see
// client.Lock.Valid).
func (h Hold) Valid() bool { return h.lock != nil && h.lock.Valid() }

// LockName is the monolock lock's name.
func (h Hold) LockName() string { return h.name }

// Slot is the slot of the Locker's run (the zero time for an Elector's
// Hold).
func (h Hold) Slot() time.Time { return h.slot }

// heldLock is what this package uses of a *client.Lock; the tests put a
// fake in its place.
type heldLock interface {
	Token() uint64
	Valid() bool
	Granted() <-chan struct{}
	Lost() <-chan struct{}
	Err() error
	Close() error
}

// service is what this package uses of a *client.Client.
type service interface {
	TryAcquire(ctx context.Context, name string, lease time.Duration) (heldLock, error)
	Enqueue(ctx context.Context, name string, lease time.Duration) (heldLock, error)
}

type clientService struct{ c *client.Client }

func (s clientService) TryAcquire(ctx context.Context, name string, lease time.Duration) (heldLock, error) {
	l, err := s.c.TryAcquire(ctx, name, lease)
	if err != nil {
		return nil, err
	}
	return l, nil
}

func (s clientService) Enqueue(ctx context.Context, name string, lease time.Duration) (heldLock, error) {
	l, err := s.c.Enqueue(ctx, name, lease)
	if err != nil {
		return nil, err
	}
	return l, nil
}
