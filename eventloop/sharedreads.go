package eventloop

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/monolock/monolock/protocol/admin"
)

// sharedReads lets concurrent reads of the same lock share one reading: a
// dashboard fleet polling a busy lock costs the loop one walk of its queue,
// not one per request. A reading stops early only when every caller waiting
// for it has given up.
type sharedReads struct {
	mu       sync.Mutex
	inFlight map[string]*sharedRead
}

type sharedRead struct {
	done    chan struct{}
	info    admin.LockInfo
	held    bool
	err     error
	callers int
	cancel  context.CancelFunc
}

func (sr *sharedReads) read(ctx context.Context, name string, read func(context.Context, string) (admin.LockInfo, bool, error)) (admin.LockInfo, bool, error) {
	if err := ctx.Err(); err != nil {
		return admin.LockInfo{}, false, fmt.Errorf("read lock %q: %w", name, err)
	}
	sr.mu.Lock()
	r := sr.inFlight[name]
	if r == nil {
		if sr.inFlight == nil {
			sr.inFlight = make(map[string]*sharedRead)
		}
		rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		r = &sharedRead{done: make(chan struct{}), cancel: cancel}
		sr.inFlight[name] = r
		go func() {
			defer cancel()
			info, held, err := read(rctx, name)
			sr.mu.Lock()
			r.info, r.held, r.err = info, held, err
			sr.forget(name, r)
			sr.mu.Unlock()
			close(r.done)
		}()
	}
	r.callers++
	sr.mu.Unlock()

	select {
	case <-r.done:
		info := r.info
		info.Waiters = slices.Clone(info.Waiters) // each caller owns its copy
		return info, r.held, r.err
	case <-ctx.Done():
		sr.mu.Lock()
		r.callers--
		if r.callers == 0 {
			sr.forget(name, r) // a caller arriving now starts afresh
			r.cancel()
		}
		sr.mu.Unlock()
		return admin.LockInfo{}, false, fmt.Errorf("read lock %q: %w", name, ctx.Err())
	}
}

// forget removes r from the readings in flight; sr.mu is held.
func (sr *sharedReads) forget(name string, r *sharedRead) {
	if sr.inFlight[name] == r {
		delete(sr.inFlight, name)
	}
}
