// Package peers starts the other lock services the harness compares monolock
// with (Redis, etcd, PostgreSQL) on loopback and drives each with its usual
// Go client: the S1 cycle, the S2 handover and the S4 expiry.
package peers

import (
	"context"
	"errors"
	"fmt"
	"github.com/monolock/monolock/bench/check"
	"github.com/monolock/monolock/bench/clock"
	"github.com/monolock/monolock/bench/hist"
	"github.com/monolock/monolock/bench/report"
	"github.com/monolock/monolock/internal/testsupport/poll"
	"github.com/monolock/monolock/internal/testsupport/proc"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// A peer is another lock service the harness starts on loopback and drives
// with its usual Go client, one connection per worker.
type Peer interface {
	Name() string
	Version() string
	// NewClient opens one worker's connection.
	NewClient(ctx context.Context, worker int) (Client, error)
	// Expiry runs reps S4 cases with the given lease at once and returns each
	// case's overshoot (grant − last heartbeat − lease). ErrNoLease when the
	// peer has no lease.
	Expiry(ctx context.Context, lease time.Duration, reps int, chk *check.Checker) (ExpiryResult, error)
	Stop()
}

// ExpiryResult is what a peer's S4 run measured.
type ExpiryResult struct {
	Overshoots []time.Duration
	Lease      time.Duration // the lease the peer actually applied
	Note       string
}

// ErrNoLease: the peer has no notion of a lease (S4 is n/a).
var ErrNoLease = errors.New("no lease")

// ErrLeaseUnsupported: the peer cannot apply this lease (S4 row is n/a).
type ErrLeaseUnsupported struct{ Why string }

func (e ErrLeaseUnsupported) Error() string { return e.Why }

// Client is one worker's lock client.
type Client interface {
	// Lock blocks (or retries) until name is granted or ctx ends. The token
	// is a fencing token when hasToken is set.
	Lock(ctx context.Context, name string) (token uint64, hasToken bool, err error)
	Unlock(ctx context.Context, name string) error
	Close()
}

// peerProc is a peer's server process.
type peerProc struct {
	*proc.Process
	dir string // removed after the process exits
}

// startPeerProc starts a peer's server; its output goes to logPath. The
// caller probes it for readiness (waitFor).
func startPeerProc(procs *proc.Group, name, bin string, args []string, logPath string, cred *syscall.Credential, stopSig syscall.Signal, dir string) (*peerProc, error) {
	p, err := proc.Start(bin, proc.Options{Name: name, Args: args, LogFile: logPath, Credential: cred, StopSignal: stopSig, StopGrace: 10 * time.Second, Group: procs})
	if err != nil {
		return nil, err
	}
	return &peerProc{Process: p, dir: dir}, nil
}

// Stop ends the peer's server and removes its files.
func (p *peerProc) Stop() {
	if p == nil || p.Process == nil {
		return
	}
	_ = p.Process.Stop()
	if p.dir != "" {
		_ = os.RemoveAll(p.dir)
	}
}

// FreePort asks the kernel for a free loopback port.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// waitFor retries probe until it succeeds, the process dies or timeout ends.
func waitFor(p *peerProc, timeout time.Duration, probe func(ctx context.Context) error) error {
	err := poll.Until(timeout, func() error {
		if !p.Alive() {
			return poll.Abort(fmt.Errorf("exited (%v); see its log", p.Err()))
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return probe(ctx)
	})
	if err != nil {
		return fmt.Errorf("not ready: %w", err)
	}
	return nil
}

// openClients opens n worker clients in parallel.
func openClients(ctx context.Context, p Peer, n int) ([]Client, error) {
	cs := make([]Client, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			cs[i], errs[i] = p.NewClient(ctx, i)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, c := range cs {
			if c != nil {
				c.Close()
			}
		}
		return nil, err
	}
	return cs, nil
}

func closeClients(cs []Client) {
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(c.Close)
	}
	wg.Wait()
}

// Result is a timed load's count and latency, a peer's or monolock's.
type Result struct {
	Count uint64
	Hist  hist.Histogram
	Secs  float64
	Err   error
}

// Rate is the count per second of the window.
func (r Result) Rate() float64 {
	if r.Secs <= 0 {
		return 0
	}
	return float64(r.Count) / r.Secs
}

// peerWorker is one worker of a peer load: its client, and the count and
// latencies it measured, which go into the load's result when it returns.
type peerWorker struct {
	id     int
	client Client
	count  uint64
	hist   hist.Histogram
}

// runPeerWorkers opens n clients of p and runs work for each on its own
// goroutine. An error work returns cancels ctx for every worker, and the
// first is the result's error.
func runPeerWorkers(p Peer, n int, win clock.Window, work func(ctx context.Context, cancel context.CancelFunc, w *peerWorker) error) Result {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs, err := openClients(ctx, p, n)
	if err != nil {
		return Result{Err: err}
	}
	defer closeClients(cs)
	res := Result{Secs: win.Seconds()}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			w := &peerWorker{id: i, client: cs[i]}
			err := work(ctx, cancel, w)
			mu.Lock()
			if err != nil && res.Err == nil {
				res.Err = err
			}
			res.Hist.Merge(&w.hist)
			res.Count += w.count
			mu.Unlock()
			if err != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	return res
}

// errUnlessEnded is err, or nil once ctx has ended: a call that fails
// because the load was cancelled is no failure of the peer.
func errUnlessEnded(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// Cycle is S1 on a peer: every worker locks and unlocks its own name as
// fast as it can; a cycle's latency runs from the lock call to the unlock's
// return.
func Cycle(p Peer, clk clock.Clock, workers int, win clock.Window, chk *check.Checker) Result {
	return runPeerWorkers(p, workers, win, func(ctx context.Context, _ context.CancelFunc, w *peerWorker) error {
		name := fmt.Sprintf("s1-%d", w.id)
		for ctx.Err() == nil {
			t0 := clk.Now()
			tok, has, err := w.client.Lock(ctx, name)
			if err != nil {
				return errUnlessEnded(ctx, err)
			}
			chk.Grant(name, w.id, clk.Now(), tok, has)
			chk.Release(name, w.id)
			if err := w.client.Unlock(ctx, name); err != nil {
				return errUnlessEnded(ctx, err)
			}
			t1 := clk.Now()
			if win.Has(t1) {
				w.count++
				w.hist.Record(t1 - t0)
			}
			if t1 >= win.Until {
				return nil
			}
		}
		return nil
	})
}

// Handover is S2 on a peer: n workers contend for one name; a worker
// that is granted the lock releases it at once and asks again. Handover
// latency runs from the moment the holder starts to release to the next
// grant.
func Handover(p Peer, clk clock.Clock, n int, name string, win clock.Window, chk *check.Checker) Result {
	var lastRelease atomic.Int64
	return runPeerWorkers(p, n, win, func(ctx context.Context, cancel context.CancelFunc, w *peerWorker) error {
		for ctx.Err() == nil {
			tok, has, err := w.client.Lock(ctx, name)
			if err != nil {
				return errUnlessEnded(ctx, err)
			}
			now := clk.Now()
			chk.Grant(name, w.id, now, tok, has)
			if lr := lastRelease.Load(); lr > 0 && win.Has(now) {
				w.count++
				w.hist.Record(now - lr)
			}
			if now >= win.Until {
				cancel() // wake the others; this one still releases
			}
			chk.Release(name, w.id)
			lastRelease.Store(clk.Now())
			uctx, ucancel := context.WithTimeout(context.Background(), 5*time.Second)
			err = w.client.Unlock(uctx, name)
			ucancel()
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// HolderBeats is how many heartbeats an S4 holder sends before it goes
// silent, on monolock and on every peer with a lease.
const HolderBeats = 2

// errSkip marks a peer that cannot take part, with the reason shown.
type errSkip string

func (e errSkip) Error() string { return string(e) }

func mkdirAll(dir string) error { return os.MkdirAll(dir, 0o755) }

// Names are the peers the harness knows, in table order.
func Names() []string { return []string{"redis", "etcd", "postgres"} }

// Start starts the chosen peers at once, in procs; a peer that cannot start is
// skipped with its reason.
func Start(procs *proc.Group, clk clock.Clock, names []string, tmp, logDir string, redisRetry time.Duration) ([]Peer, []report.PeerStatus) {
	type started struct {
		p   Peer
		err error
	}
	out := make([]started, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			logPath := ""
			if logDir != "" {
				logPath = filepath.Join(logDir, "peer-"+name+".log")
			}
			var p Peer
			var err error
			switch name {
			case "redis":
				var rp *RedisPeer
				if rp, err = startRedis(procs, clk, tmp, logPath, redisRetry); err == nil {
					p = rp
				}
			case "etcd":
				var ep *EtcdPeer
				if ep, err = StartEtcd(procs, clk, tmp, logPath); err == nil {
					p = ep
				}
			case "postgres":
				var pp *PostgresPeer
				if pp, err = startPostgres(logPath); err == nil {
					p = pp
				}
			default:
				err = errSkip("unknown peer")
			}
			out[i] = started{p, err}
		})
	}
	wg.Wait()
	var ps []Peer
	var st []report.PeerStatus
	for i, s := range out {
		if s.err != nil {
			st = append(st, report.PeerStatus{Name: names[i], Status: "skipped", Reason: s.err.Error()})
			continue
		}
		ps = append(ps, s.p)
		st = append(st, report.PeerStatus{Name: names[i], Status: "ok", Version: s.p.Version()})
	}
	return ps, st
}

// PID is the peer's server process for CPU sampling; for PostgreSQL,
// whose work is spread over a backend per connection, the negated pid of
// the postmaster (it and its children are summed).
func PID(p Peer) int {
	switch p := p.(type) {
	case *RedisPeer:
		return p.proc.Pid()
	case *EtcdPeer:
		return p.proc.Pid()
	case *PostgresPeer:
		return -p.srv.Pid() // the postmaster and its backends
	}
	return 0
}
