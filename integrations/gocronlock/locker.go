package gocronlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/monolock/monolock/client"
)

// NewLocker returns a gocron.Locker that runs each scheduled run of a job on
// one scheduler of the fleet, with c's server (see the package
// documentation). Pass it to gocron.WithDistributedLocker, and the same
// WithSlot to every scheduler of the fleet.
func NewLocker(c *client.Client, opts ...Option) gocron.Locker {
	return newLocker(clientService{c}, newConfig(opts))
}

func newLocker(svc service, cfg config) *locker {
	return &locker{svc: svc, cfg: cfg, running: map[string]Hold{}}
}

type locker struct {
	svc service
	cfg config

	mu      sync.Mutex
	running map[string]Hold // job name → the run between Lock and Unlock
}

// RunLockName is the name of the lock of the run of job key due at due:
// prefix, key, "@" and the slot's start in RFC 3339, UTC.
func RunLockName(prefix, key string, slot time.Duration, due time.Time) string {
	return prefix + key + "@" + due.Truncate(slot).UTC().Format(time.RFC3339Nano)
}

// Lock takes the lock of the run of key that is due now, without waiting.
func (l *locker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	now := l.cfg.clock.Now()
	slot := now.Truncate(l.cfg.slot)
	name := RunLockName(l.cfg.prefix, key, l.cfg.slot, now)
	actx, cancel := context.WithTimeout(ctx, l.cfg.timeout)
	defer cancel()
	lk, err := l.svc.TryAcquire(actx, name, l.cfg.lease)
	if errors.Is(err, client.ErrBusy) {
		return nil, fmt.Errorf("%w: lock %q is held (the run is due at %s): this scheduler skips it", ErrRunTaken, name, slot.UTC().Format(time.RFC3339Nano))
	}
	if err != nil {
		return nil, fmt.Errorf("gocronlock: take lock %q for the run of job %q: %w", name, key, err)
	}
	h := Hold{lock: lk, name: name, slot: slot}
	l.mu.Lock()
	l.running[key] = h
	l.mu.Unlock()
	return &runLock{l: l, key: key, hold: h}, nil
}

// Held is the Hold of the run of job key that l is running in this process,
// for the job's fencing token; the zero Hold when l is not a Locker of this
// package or runs no run of key.
func Held(l gocron.Locker, key string) Hold {
	lk, ok := l.(*locker)
	if !ok {
		return Hold{}
	}
	lk.mu.Lock()
	defer lk.mu.Unlock()
	return lk.running[key]
}

// runLock is one run's lock, as gocron unlocks it.
type runLock struct {
	l    *locker
	key  string
	hold Hold
	once sync.Once
}

// Unlock ends the run: Held forgets it at once, and the lock is released
// two slots after the run's slot began (at once when that has passed), so
// that a scheduler that comes late to the same run finds it held.
func (r *runLock) Unlock(context.Context) error {
	var err error
	r.once.Do(func() {
		l := r.l
		l.mu.Lock()
		if l.running[r.key].lock == r.hold.lock {
			delete(l.running, r.key)
		}
		l.mu.Unlock()
		wait := r.hold.slot.Add(2 * l.cfg.slot).Sub(l.cfg.clock.Now())
		if wait <= 0 {
			err = r.release()
			return
		}
		l.cfg.clock.AfterFunc(wait, func() {
			if err := r.release(); err != nil {
				l.cfg.log("gocronlock: the run's lock was lost before its hold ended", "lock", r.hold.name, "err", err)
			}
		})
	})
	return err
}

func (r *runLock) release() error {
	if err := r.hold.lock.Close(); err != nil {
		return fmt.Errorf("gocronlock: release lock %q: it was lost before: %w", r.hold.name, err)
	}
	return nil
}
