package main

import (
	"context"
	"errors"
	"fmt"
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
type peer interface {
	Name() string
	Version() string
	// NewClient opens one worker's connection.
	NewClient(ctx context.Context, worker int) (peerClient, error)
	// Expiry runs reps S4 cases with the given lease at once and returns each
	// case's overshoot (grant − last heartbeat − lease). errNoLease when the
	// peer has no lease.
	Expiry(ctx context.Context, lease time.Duration, reps int, chk *Checker) (expiryResult, error)
	Stop()
}

// expiryResult is what a peer's S4 run measured.
type expiryResult struct {
	overshoots []time.Duration
	lease      time.Duration // the lease the peer actually applied
	note       string
}

// errNoLease: the peer has no notion of a lease (S4 is n/a).
var errNoLease = errors.New("no lease")

// errLeaseUnsupported: the peer cannot apply this lease (S4 row is n/a).
type errLeaseUnsupported struct{ why string }

func (e errLeaseUnsupported) Error() string { return e.why }

// peerClient is one worker's lock client.
type peerClient interface {
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

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
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
func openClients(ctx context.Context, p peer, n int) ([]peerClient, error) {
	cs := make([]peerClient, n)
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

func closeClients(cs []peerClient) {
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(c.Close)
	}
	wg.Wait()
}

// loadResult is a timed load's count and latency.
type loadResult struct {
	count uint64
	hist  hist.Histogram
	secs  float64
	err   error
}

func (r loadResult) rate() float64 {
	if r.secs <= 0 {
		return 0
	}
	return float64(r.count) / r.secs
}

// peerWorker is one worker of a peer load: its client, and the count and
// latencies it measured, which go into the load's result when it returns.
type peerWorker struct {
	id     int
	client peerClient
	count  uint64
	hist   hist.Histogram
}

// runPeerWorkers opens n clients of p and runs work for each on its own
// goroutine. An error work returns cancels ctx for every worker, and the
// first is the result's error.
func runPeerWorkers(p peer, n int, win window, work func(ctx context.Context, cancel context.CancelFunc, w *peerWorker) error) loadResult {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs, err := openClients(ctx, p, n)
	if err != nil {
		return loadResult{err: err}
	}
	defer closeClients(cs)
	res := loadResult{secs: win.seconds()}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			w := &peerWorker{id: i, client: cs[i]}
			err := work(ctx, cancel, w)
			mu.Lock()
			if err != nil && res.err == nil {
				res.err = err
			}
			res.hist.Merge(&w.hist)
			res.count += w.count
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

// peerCycle is S1 on a peer: every worker locks and unlocks its own name as
// fast as it can; a cycle's latency runs from the lock call to the unlock's
// return.
func peerCycle(p peer, workers int, win window, chk *Checker) loadResult {
	return runPeerWorkers(p, workers, win, func(ctx context.Context, _ context.CancelFunc, w *peerWorker) error {
		name := fmt.Sprintf("s1-%d", w.id)
		for ctx.Err() == nil {
			t0 := mono()
			tok, has, err := w.client.Lock(ctx, name)
			if err != nil {
				return errUnlessEnded(ctx, err)
			}
			chk.Grant(name, w.id, mono(), tok, has)
			chk.Release(name, w.id)
			if err := w.client.Unlock(ctx, name); err != nil {
				return errUnlessEnded(ctx, err)
			}
			t1 := mono()
			if win.has(t1) {
				w.count++
				w.hist.Record(t1 - t0)
			}
			if t1 >= win.until {
				return nil
			}
		}
		return nil
	})
}

// peerHandover is S2 on a peer: n workers contend for one name; a worker
// that is granted the lock releases it at once and asks again. Handover
// latency runs from the moment the holder starts to release to the next
// grant.
func peerHandover(p peer, n int, name string, win window, chk *Checker) loadResult {
	var lastRelease atomic.Int64
	return runPeerWorkers(p, n, win, func(ctx context.Context, cancel context.CancelFunc, w *peerWorker) error {
		for ctx.Err() == nil {
			tok, has, err := w.client.Lock(ctx, name)
			if err != nil {
				return errUnlessEnded(ctx, err)
			}
			now := mono()
			chk.Grant(name, w.id, now, tok, has)
			if lr := lastRelease.Load(); lr > 0 && win.has(now) {
				w.count++
				w.hist.Record(now - lr)
			}
			if now >= win.until {
				cancel() // wake the others; this one still releases
			}
			chk.Release(name, w.id)
			lastRelease.Store(mono())
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

// errSkip marks a peer that cannot take part, with the reason shown.
type errSkip string

func (e errSkip) Error() string { return string(e) }

func mkdirAll(dir string) error { return os.MkdirAll(dir, 0o755) }

// peerNames are the peers the harness knows, in table order.
var peerNames = []string{"redis", "etcd", "postgres"}

// startPeers starts the chosen peers at once, in procs; a peer that cannot start is
// skipped with its reason.
func startPeers(procs *proc.Group, names []string, tmp, logDir string, redisRetry time.Duration) ([]peer, []report.PeerStatus) {
	type started struct {
		p   peer
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
			var p peer
			var err error
			switch name {
			case "redis":
				var rp *redisPeer
				if rp, err = startRedis(procs, tmp, logPath, redisRetry); err == nil {
					p = rp
				}
			case "etcd":
				var ep *etcdPeer
				if ep, err = startEtcd(procs, tmp, logPath); err == nil {
					p = ep
				}
			case "postgres":
				var pp *pgPeer
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
	var ps []peer
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
