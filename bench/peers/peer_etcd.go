package peers

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/monolock/monolock/internal/testsupport/proc"

	"github.com/monolock/monolock/bench/check"
	"github.com/monolock/monolock/bench/clock"
	"github.com/monolock/monolock/internal/testsupport/poll"
)

// etcd, one member: clientv3/concurrency Session + Mutex, each worker with
// its own client (its own connection) and a long-lived session.

type EtcdPeer struct {
	proc     *peerProc
	endpoint string
	version  string
	clock    clock.Clock
}

// etcdSessionTTL is the lease of S1/S2 sessions (seconds).
const etcdSessionTTL = 30

// StartEtcd starts a one-member etcd on ports picked at run time, its data
// in tmp, stopped with procs.
func StartEtcd(procs *proc.Group, clk clock.Clock, tmp, logPath string) (*EtcdPeer, error) {
	bin, err := exec.LookPath("etcd")
	if err != nil {
		return nil, errSkip("etcd is not installed (package etcd-server; make bench-peers)")
	}
	cport, err := FreePort()
	if err != nil {
		return nil, err
	}
	pport, err := FreePort()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(tmp, "etcd")
	if err := mkdirAll(dir); err != nil {
		return nil, err
	}
	curl := "http://127.0.0.1:" + strconv.Itoa(cport)
	purl := "http://127.0.0.1:" + strconv.Itoa(pport)
	proc, err := startPeerProc(procs, "etcd", bin, []string{
		"--name", "bench", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", curl, "--advertise-client-urls", curl,
		"--listen-peer-urls", purl, "--initial-advertise-peer-urls", purl,
		"--initial-cluster", "bench=" + purl, "--initial-cluster-state", "new",
		"--logger", "zap", "--log-level", "warn",
	}, logPath, nil, syscall.SIGTERM, dir)
	if err != nil {
		return nil, err
	}
	p := &EtcdPeer{proc: proc, endpoint: "127.0.0.1:" + strconv.Itoa(cport), clock: clk}
	err = waitFor(proc, 20*time.Second, func(ctx context.Context) error {
		c, err := p.client()
		if err != nil {
			return err
		}
		defer func() { _ = c.Close() }()
		st, err := c.Status(ctx, p.endpoint)
		if err != nil {
			return err
		}
		p.version = st.Version
		return nil
	})
	if err != nil {
		proc.Stop()
		return nil, fmt.Errorf("etcd: %w", err)
	}
	return p, nil
}

func (p *EtcdPeer) client() (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   []string{p.endpoint},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
}

// Endpoint is the member's client address, host:port.
func (p *EtcdPeer) Endpoint() string { return p.endpoint }

func (p *EtcdPeer) Name() string    { return "etcd" }
func (p *EtcdPeer) Version() string { return p.version }
func (p *EtcdPeer) Stop()           { p.proc.Stop() }

func (p *EtcdPeer) NewClient(ctx context.Context, _ int) (Client, error) {
	c, err := p.client()
	if err != nil {
		return nil, err
	}
	s, err := concurrency.NewSession(c, concurrency.WithTTL(etcdSessionTTL), concurrency.WithContext(ctx))
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	return &etcdClient{c: c, s: s, mutexes: map[string]*concurrency.Mutex{}}, nil
}

type etcdClient struct {
	c       *clientv3.Client
	s       *concurrency.Session
	mutexes map[string]*concurrency.Mutex
}

func (c *etcdClient) mutex(name string) *concurrency.Mutex {
	m := c.mutexes[name]
	if m == nil {
		m = concurrency.NewMutex(c.s, "/bench/"+name)
		c.mutexes[name] = m
	}
	return m
}

// Lock takes the mutex; the fencing token is the revision of the grant.
func (c *etcdClient) Lock(ctx context.Context, name string) (uint64, bool, error) {
	m := c.mutex(name)
	if err := m.Lock(ctx); err != nil {
		return 0, false, err
	}
	return uint64(m.Header().Revision), true, nil
}

func (c *etcdClient) Unlock(ctx context.Context, name string) error {
	return c.mutex(name).Unlock(ctx)
}

func (c *etcdClient) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, _ = c.c.Revoke(ctx, c.s.Lease())
	c.s.Orphan()
	_ = c.c.Close()
}

// Expiry: the holder's session runs on a lease granted with TTL = lease
// (whole seconds only); after it takes the mutex its session keeps the lease
// alive as usual; it then stops the session's keep-alive, sends one last
// keep-alive of its own (the "last heartbeat") and goes silent with its
// connection open. The waiter blocks in Mutex.Lock until etcd expires the
// lease and deletes the holder's key.
func (p *EtcdPeer) Expiry(ctx context.Context, lease time.Duration, reps int, chk *check.Checker) (ExpiryResult, error) {
	if lease%time.Second != 0 {
		return ExpiryResult{}, ErrLeaseUnsupported{"etcd leases are whole seconds"}
	}
	res := ExpiryResult{Lease: lease}
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		errs    []error
		granted int64
	)
	for rep := range reps {
		wg.Go(func() {
			d, ttl, err := p.expiryOnce(ctx, lease, rep, chk)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			granted = ttl
			res.Overshoots = append(res.Overshoots, d)
		})
	}
	wg.Wait()
	if granted > 0 && time.Duration(granted)*time.Second != lease {
		res.Lease = time.Duration(granted) * time.Second
		res.Note = fmt.Sprintf("asked TTL %v, etcd granted %ds (its minimum); overshoot against the granted TTL", lease, granted)
	}
	return res, errors.Join(errs...)
}

func (p *EtcdPeer) expiryOnce(ctx context.Context, lease time.Duration, rep int, chk *check.Checker) (time.Duration, int64, error) {
	name := fmt.Sprintf("s4-%v-%d", lease, rep)
	hc, err := p.client()
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = hc.Close() }()
	g, err := hc.Grant(ctx, int64(lease/time.Second))
	if err != nil {
		return 0, 0, err
	}
	ttl := time.Duration(g.TTL) * time.Second
	hs, err := concurrency.NewSession(hc, concurrency.WithLease(g.ID), concurrency.WithContext(ctx))
	if err != nil {
		return 0, 0, err
	}
	hm := concurrency.NewMutex(hs, "/bench/"+name)
	if err := hm.Lock(ctx); err != nil {
		return 0, 0, err
	}
	chk.Grant(name, 0, p.clock.Now(), uint64(hm.Header().Revision), true)

	wc, err := p.NewClient(ctx, 1)
	if err != nil {
		return 0, 0, err
	}
	defer wc.Close()
	type lockResult struct {
		tok uint64
		at  int64
		err error
	}
	got := make(chan lockResult, 1)
	wctx, cancel := context.WithTimeout(ctx, 3*ttl+10*time.Second)
	defer cancel()
	go func() {
		tok, _, err := wc.Lock(wctx, name)
		got <- lockResult{tok, p.clock.Now(), err}
	}()

	// Two keep-alive periods under the session's own refresh, then silence.
	if err := poll.Sleep(ctx, ttl/2); err != nil {
		return 0, 0, err
	}
	hs.Orphan()
	last := p.clock.Now()
	if _, err := hc.KeepAliveOnce(ctx, g.ID); err != nil {
		return 0, 0, fmt.Errorf("etcd S4 %s: last keep-alive: %w", name, err)
	}
	chk.Lapse(name, 0, last+int64(ttl))
	r := <-got
	if r.err != nil {
		return 0, 0, fmt.Errorf("etcd S4 %s: waiter: %w", name, r.err)
	}
	chk.Grant(name, 1, r.at, r.tok, true)
	return time.Duration(r.at - last - int64(ttl)), g.TTL, nil
}
