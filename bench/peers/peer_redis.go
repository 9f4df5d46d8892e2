package peers

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/monolock/monolock/internal/testsupport/proc"

	"github.com/monolock/monolock/bench/check"
	"github.com/monolock/monolock/bench/clock"
	"github.com/monolock/monolock/internal/testsupport/poll"
)

// Redis, single instance, the documented recipe: SET name token NX PX lease
// to take the lock, a compare-and-delete script to release it, and waiters
// that retry after a short randomized delay.

// redisLease is the PX of S1/S2 locks: far longer than any hold there.
const redisLease = 30 * time.Second

var (
	redisRelease = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`)
	redisExtend  = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("pexpire", KEYS[1], ARGV[2]) else return 0 end`)
)

type RedisPeer struct {
	proc    *peerProc
	addr    string
	version string
	retry   time.Duration // a waiter sleeps a random time in [retry, 2·retry)
	clock   clock.Clock
}

// Retry is the shortest pause of a waiter between two tries.
func (p *RedisPeer) Retry() time.Duration { return p.retry }

func startRedis(procs *proc.Group, clk clock.Clock, tmp, logPath string, retry time.Duration) (*RedisPeer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errSkip("redis-server is not installed (make bench-peers)")
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(tmp, "redis")
	if err := mkdirAll(dir); err != nil {
		return nil, err
	}
	proc, err := startPeerProc(procs, "redis", bin, []string{
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--protected-mode", "no", "--dir", dir, "--daemonize", "no", "--loglevel", "warning",
		"--maxclients", "10000",
	}, logPath, nil, syscall.SIGTERM, dir)
	if err != nil {
		return nil, err
	}
	p := &RedisPeer{proc: proc, addr: "127.0.0.1:" + strconv.Itoa(port), retry: retry, clock: clk}
	c := p.client()
	defer func() { _ = c.Close() }()
	if err := waitFor(proc, 15*time.Second, func(ctx context.Context) error { return c.Ping(ctx).Err() }); err != nil {
		proc.Stop()
		return nil, fmt.Errorf("redis: %w", err)
	}
	if info, err := c.Info(context.Background(), "server").Result(); err == nil {
		for line := range strings.SplitSeq(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
				p.version = v
			}
		}
	}
	return p, nil
}

// client returns a client with one connection: one worker, one socket.
func (p *RedisPeer) client() *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr: p.addr, PoolSize: 1, MinIdleConns: 1, MaxRetries: -1,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
}

func (p *RedisPeer) Name() string    { return "redis" }
func (p *RedisPeer) Version() string { return p.version }
func (p *RedisPeer) Stop()           { p.proc.Stop() }

func (p *RedisPeer) NewClient(ctx context.Context, worker int) (Client, error) {
	c := p.client()
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		return nil, err
	}
	return &redisClient{c: c, p: p, id: worker, rng: rand.New(rand.NewPCG(uint64(worker), 42))}, nil
}

type redisClient struct {
	c     *redis.Client
	p     *RedisPeer
	id    int
	seq   uint64
	value string // this holder's random value, for the compare-and-delete
	rng   *rand.Rand
}

func (c *redisClient) Lock(ctx context.Context, name string) (uint64, bool, error) {
	c.seq++
	c.value = strconv.Itoa(c.id) + ":" + strconv.FormatUint(c.seq, 10) + ":" + strconv.FormatUint(c.rng.Uint64(), 36)
	for {
		ok, err := c.c.SetNX(ctx, name, c.value, redisLease).Result()
		if err != nil {
			return 0, false, err
		}
		if ok {
			return 0, false, nil
		}
		if err := poll.Sleep(ctx, c.p.retry+time.Duration(c.rng.Int64N(int64(c.p.retry)))); err != nil {
			return 0, false, err
		}
	}
}

func (c *redisClient) Unlock(ctx context.Context, name string) error {
	n, err := redisRelease.Run(ctx, c.c, []string{name}, c.value).Int()
	if err != nil {
		return err
	}
	if n != 1 {
		return fmt.Errorf("redis: release of %q found another value", name)
	}
	return nil
}

func (c *redisClient) Close() { _ = c.c.Close() }

// Expiry: the holder takes the lock with PX lease and extends it twice, a
// lease/4 apart, with a compare-and-PEXPIRE script; then it goes silent. The
// waiter retries SET NX PX with the usual randomized delay until it wins.
func (p *RedisPeer) Expiry(ctx context.Context, lease time.Duration, reps int, chk *check.Checker) (ExpiryResult, error) {
	res := ExpiryResult{Lease: lease}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
	)
	for rep := range reps {
		wg.Go(func() {
			d, err := p.expiryOnce(ctx, lease, rep, chk)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			res.Overshoots = append(res.Overshoots, d)
		})
	}
	wg.Wait()
	res.Note = fmt.Sprintf("waiter retries every %v–%v", p.retry, 2*p.retry)
	return res, errors.Join(errs...)
}

func (p *RedisPeer) expiryOnce(ctx context.Context, lease time.Duration, rep int, chk *check.Checker) (time.Duration, error) {
	name := fmt.Sprintf("s4-%v-%d", lease, rep)
	hc, err := p.NewClient(ctx, 2*rep)
	if err != nil {
		return 0, err
	}
	defer hc.Close()
	wc, err := p.NewClient(ctx, 2*rep+1)
	if err != nil {
		return 0, err
	}
	defer wc.Close()
	h := hc.(*redisClient)
	h.value = "holder-" + name
	t0 := p.clock.Now()
	ok, err := h.c.SetNX(ctx, name, h.value, lease).Result()
	if err != nil || !ok {
		return 0, fmt.Errorf("redis S4 %s: holder SET NX: %v %v", name, ok, err)
	}
	chk.Grant(name, 0, p.clock.Now(), 0, false)
	last := t0
	for range HolderBeats {
		if err := poll.Sleep(ctx, time.Duration(last+int64(lease/4)-p.clock.Now())); err != nil {
			return 0, err
		}
		t := p.clock.Now()
		n, err := redisExtend.Run(ctx, h.c, []string{name}, h.value, lease.Milliseconds()).Int()
		if err != nil || n != 1 {
			return 0, fmt.Errorf("redis S4 %s: extend: %d %v", name, n, err)
		}
		last = t
	}
	chk.Lapse(name, 0, last+int64(lease))
	wctx, cancel := context.WithTimeout(ctx, 3*lease+10*time.Second)
	defer cancel()
	if _, _, err := wc.Lock(wctx, name); err != nil {
		return 0, fmt.Errorf("redis S4 %s: waiter: %w", name, err)
	}
	now := p.clock.Now()
	chk.Grant(name, 1, now, 0, false)
	return time.Duration(now - last - int64(lease)), nil
}
