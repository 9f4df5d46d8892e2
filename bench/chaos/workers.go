package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/monolock/monolock/client"

	"github.com/monolock/monolock/internal/testsupport/poll"
)

// workload is the clients' side of a run.
type workload struct {
	locks    []string
	minLease time.Duration
	maxLease time.Duration
	maxPause time.Duration // cap of one simulated pause
	res      *Resource
	rec      *recorder
}

// grantRec is a ClientGrant being filled in while the client holds the lock.
type grantRec struct {
	mu sync.Mutex
	g  ClientGrant
}

// recorder collects the clients' grant records and loss causes.
type recorder struct {
	mu     sync.Mutex
	grants []*grantRec
	causes map[string]int // why locks were lost while held, and why attempts failed
	nextID atomic.Int64
}

func newRecorder() *recorder { return &recorder{causes: map[string]int{}} }

func (r *recorder) begin(clientID int, lock string, token uint64, lease time.Duration, mode string) *grantRec {
	gr := &grantRec{g: ClientGrant{
		ID: int(r.nextID.Add(1)), Client: clientID, Lock: lock, Token: token, Lease: lease, Mode: mode,
		GrantedAt: time.Now().Round(0),
	}}
	r.mu.Lock()
	r.grants = append(r.grants, gr)
	r.mu.Unlock()
	return gr
}

func (r *recorder) count(cause string) {
	r.mu.Lock()
	r.causes[cause]++
	r.mu.Unlock()
}

// lost is called (through context.AfterFunc) when the lock's context ends. Only
// a loss counts: ErrReleased after the code's own release does not.
func (r *recorder) lost(gr *grantRec, cause error) {
	at := time.Now().Round(0)
	name := lossName(cause)
	if name == "" {
		return
	}
	gr.mu.Lock()
	if gr.g.LostAt.IsZero() {
		gr.g.LostAt, gr.g.LossCause = at, name
	}
	gr.mu.Unlock()
	r.count("lost while holding: " + name)
}

// ended records the end of the guarded code and the lock's give-up
// deadline then (Lock.ValidUntil: its last one, after a loss).
func (r *recorder) ended(gr *grantRec, validUntil time.Time) {
	at := time.Now().Round(0)
	until := validUntil.Round(0)
	gr.mu.Lock()
	gr.g.EndedAt, gr.g.ValidUntil = at, until
	gr.mu.Unlock()
}

// snapshot returns the finished records.
func (r *recorder) snapshot() []ClientGrant {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]ClientGrant, len(r.grants))
	for i, gr := range r.grants {
		gr.mu.Lock()
		out[i] = gr.g
		gr.mu.Unlock()
	}
	return out
}

func (r *recorder) n() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.grants)
}

func (r *recorder) causeCounts() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.causes))
	for k, v := range r.causes {
		out[k] = v
	}
	return out
}

// lossName classifies the cause of a cancelled lock context; "" when it is
// not a loss.
func lossName(cause error) string {
	var se *client.ServerError
	switch {
	case errors.Is(cause, client.ErrHeartbeatTimeout):
		return "heartbeat timeout"
	case errors.Is(cause, client.ErrConnectionClosed):
		return "connection lost"
	case errors.Is(cause, client.ErrProtocolViolation):
		return "protocol violation"
	case errors.As(cause, &se):
		return serverErrorName(se)
	}
	return ""
}

// worker is one client: it loops until stop, each time picking a lock and a
// lease, waiting for the lock through its proxy, and doing a few fenced
// writes while holding it.
type worker struct {
	id     int
	c      *client.Client
	w      *workload
	handle bool // use Acquire and the Lock handle instead of DoRetry
}

func (wk *worker) loop(stop context.Context) {
	for stop.Err() == nil {
		lock := wk.w.locks[rand.IntN(len(wk.w.locks))]
		lease := logUniform(wk.w.minLease, wk.w.maxLease).Round(time.Millisecond)
		wait := time.Duration(2+rand.IntN(12)) * time.Second
		if wk.handle {
			wk.viaHandle(stop, lock, lease, wait)
		} else {
			wk.viaDo(stop, lock, lease, wait)
		}
		_ = poll.Sleep(stop, time.Duration(rand.IntN(150))*time.Millisecond)
	}
}

// viaDo takes the lock with DoRetry. Its ctx must bound only the wait: once
// fn runs, a cancelled Do ctx would hide a later loss from fn (the first
// cancellation wins), so the wait bound is lifted the moment fn starts.
func (wk *worker) viaDo(stop context.Context, lock string, lease, wait time.Duration) {
	gate := newWaitGate(stop, wait)
	defer gate.close()
	err := wk.c.DoRetry(gate.ctx, lock, lease, func(ctx context.Context, token uint64) error {
		gr := wk.w.rec.begin(wk.id, lock, token, lease, "do")
		stopWatch := context.AfterFunc(ctx, func() { wk.w.rec.lost(gr, context.Cause(ctx)) })
		defer stopWatch()
		l := client.LockFromContext(ctx)
		if gate.begin() {
			wk.work(stop, l, gr, lease)
		}
		wk.w.rec.ended(gr, l.ValidUntil())
		return nil
	})
	if err != nil && !gate.began() {
		wk.w.rec.count("DoRetry gave up before the grant: " + attemptError(err))
	}
}

// viaHandle takes the lock with Acquire, retrying transient failures itself,
// and works under the Lock's own context.
func (wk *worker) viaHandle(stop context.Context, lock string, lease, wait time.Duration) {
	ctx, cancel := context.WithTimeout(stop, wait)
	defer cancel()
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		l, err := wk.c.Acquire(ctx, lock, lease)
		if err != nil {
			wk.w.rec.count("Acquire failed: " + attemptError(err))
			var se *client.ServerError
			if errors.As(err, &se) && !se.Retryable() {
				return
			}
			_ = poll.Sleep(ctx, backoff/2+rand.N(backoff/2))
			backoff = min(2*backoff, time.Second)
			continue
		}
		lctx := l.Context()
		gr := wk.w.rec.begin(wk.id, lock, l.Token(), lease, "handle")
		stopWatch := context.AfterFunc(lctx, func() { wk.w.rec.lost(gr, context.Cause(lctx)) })
		wk.work(stop, l, gr, lease)
		wk.w.rec.ended(gr, l.ValidUntil())
		_ = l.Close()
		stopWatch()
		return
	}
}

// work is the guarded code: a few writes to the fenced resource, spaced over
// time. Before each step it looks whether the lock is still confirmed
// (Lock.Valid, the check the client documents before a side effect) and
// stops if not; then it "works" for a while without looking — usually a
// fraction of the lease, sometimes a pause longer than the lease (a GC pause,
// a stalled VM) — and writes. A loss during that time makes the write stale:
// the holder really attempts it, and fencing has to reject it.
func (wk *worker) work(stop context.Context, l *client.Lock, gr *grantRec, lease time.Duration) {
	writes := 2 + rand.IntN(3)
	for i := 0; i < writes; i++ {
		if !l.Valid() || stop.Err() != nil {
			return
		}
		if i > 0 {
			var d time.Duration
			if rand.IntN(4) == 0 {
				d = time.Duration(float64(lease) * (0.8 + 1.2*rand.Float64()))
				d = min(d, wk.w.maxPause)
			} else {
				d = time.Duration(float64(lease) * (0.05 + 0.3*rand.Float64()))
			}
			time.Sleep(d) // deliberately deaf to both contexts
		}
		checked := time.Now().Round(0)
		believed := l.Valid()
		wk.w.res.Write(gr.g.Lock, gr.g.Token, wk.id, gr.g.ID, believed, checked)
	}
}

// waitGate is a context for DoRetry that is cancelled when the wait bound or
// stop ends, but only if fn has not started yet.
type waitGate struct {
	ctx    context.Context
	cancel context.CancelFunc
	timer  *time.Timer
	unhook func() bool

	mu        sync.Mutex
	started   bool
	cancelled bool
}

func newWaitGate(stop context.Context, wait time.Duration) *waitGate {
	g := &waitGate{}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	g.timer = time.AfterFunc(wait, g.expire)
	g.unhook = context.AfterFunc(stop, g.expire)
	return g
}

func (g *waitGate) expire() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.started {
		g.cancelled = true
		g.cancel()
	}
}

// begin marks fn as started; false if the wait had already been called off
// (fn then gives the lock back at once).
func (g *waitGate) begin() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cancelled {
		return false
	}
	g.started = true
	return true
}

func (g *waitGate) began() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.started
}

func (g *waitGate) close() {
	g.timer.Stop()
	g.unhook()
	g.cancel()
}

func attemptError(err error) string {
	var se *client.ServerError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return "wait ended"
	case errors.Is(err, client.ErrHeartbeatTimeout):
		return "heartbeat timeout"
	case errors.Is(err, client.ErrConnectionClosed):
		return "connection lost"
	case errors.As(err, &se):
		return serverErrorName(se)
	}
	return "other: " + err.Error()
}

func serverErrorName(se *client.ServerError) string {
	return fmt.Sprintf("ERROR 0x%02x (%s)", uint8(se.Code), se.Code)
}

// logUniform returns a duration between lo and hi, uniform in log scale, so
// that tens of milliseconds are as common as seconds.
func logUniform(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	f := math.Log(float64(lo)) + rand.Float64()*(math.Log(float64(hi))-math.Log(float64(lo)))
	return time.Duration(math.Exp(f))
}
