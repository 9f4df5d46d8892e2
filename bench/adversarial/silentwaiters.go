package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/monolock/monolock/internal/testsupport/faultproxy"
	"github.com/monolock/monolock/internal/testsupport/proc"
	"github.com/monolock/monolock/internal/testsupport/wire"
	"github.com/monolock/monolock/protocol"
)

// --- 9, 10: silent waiters and churners at the descriptor limit -----------
//
// A server of its own, limited to -waiters-nofile descriptors, is filled
// with waiters that never heartbeat (a 10-minute lease, longer than the
// run), leaving about evictableSlots descriptors, and then with
// -churners silent connections, each reopened as soon as the server closes
// it. Only then do its witnesses start: the canary must get its lock during
// the attack and keep it. Two sets of witnesses watch it, one direct and
// one through a proxy that delays each direction by 75 ms (a 150 ms round
// trip; the slow prober's TLS is 1.2, two round trips), and honest clients
// take a fresh lock over and over, direct and slow, each given 5 s from
// its connect to ACQUIRED.

const (
	silentQueue    = "adversarial/silent-queue"
	evictableSlots = 100
	slowOneWay     = 75 * time.Millisecond
	honestBound    = 5 * time.Second
	honestLoops    = 8 // of each kind: direct and slow
	harnessMargin  = 4096
)

// waitersAttack is the limited server, its attackers and its proxy.
type waitersAttack struct {
	shape    waiterShape
	srv      *proc.Process
	proxy    *faultproxy.Proxy
	direct   target
	slow     target
	waiters  []*wire.Conn
	children []*proc.Child // hold the waiters beyond this process's share
	queued   int           // the silent holder and every waiter, here and in children
	watched  []*witnesses  // direct, slow
	opened   atomic.Int64
	stop     context.CancelFunc
	done     sync.WaitGroup
}

func prepareSilentWaitersPlain(e *env) (*waitersAttack, []*witnesses, func(), error) {
	return prepareWaiters(e, false, agedWaiters)
}

func prepareSilentWaitersMTLS(e *env) (*waitersAttack, []*witnesses, func(), error) {
	return prepareWaiters(e, true, agedWaiters)
}

// prepareWaiters returns the limited server and its attackers.
func prepareWaiters(e *env, mtls bool, shape waiterShape) (_ *waitersAttack, extra []*witnesses, stop func(), err error) {
	a := &waitersAttack{shape: shape}
	defer func() {
		if err != nil {
			a.close()
		}
	}()
	name := "plain"
	args := []string{"-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, e.cfg.waitersNofile), e.cfg.server,
		"-listen", "127.0.0.1:0", "-log-format", "json", "-log-level", "info", "-ops-listen", "127.0.0.1:0",
		"-admin-listen", "127.0.0.1:0"}
	if shape.silence > 0 {
		args = append(args, "-waiter-silence-limit", shape.silence.String())
	}
	if mtls {
		name = "mTLS"
		args = append(args, e.tlsArgs...)
	}
	a.srv, err = proc.Start("/bin/sh", proc.Options{
		Name: fmt.Sprintf("monolock (%s, nofile %d)", name, e.cfg.waitersNofile), Args: args, StartLine: proc.StartedMessage,
		LogFile: filepath.Join(e.dir, "waiters-"+name+".log"), StartTimeout: 15 * time.Second, StopGrace: 15 * time.Second, Group: e.procs,
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("start a server limited to %d descriptors: %w", e.cfg.waitersNofile, err)
	}
	a.direct = target{name: name + "-limited", addr: a.srv.Addr, ops: a.srv.OpsAddr, pid: a.srv.Pid()}
	if mtls {
		a.direct.tls = e.clientTLS()
	}
	if a.proxy, err = faultproxy.New(a.srv.Addr); err != nil {
		return nil, nil, nil, err
	}
	a.proxy.SetDelay(slowOneWay)
	a.slow = a.direct
	a.slow.name, a.slow.addr = name+"-limited-150ms", a.proxy.Addr()
	if mtls {
		a.slow.tls = e.clientTLS()
		a.slow.tls.MaxVersion = tls.VersionTLS12
	}

	// One silent holder, then silent waiters up to evictableSlots short of
	// the limit: as many as fit in this process beside the churners, the
	// rest in child processes.
	open, err := openDescriptors(a.srv.Pid())
	if err != nil {
		return nil, nil, nil, err
	}
	n := e.cfg.waitersNofile - open - evictableSlots - 1
	attacker := a.direct
	attacker.from = attackSource
	if a.waiters, err = holders(attacker, 1, func(int) string { return silentQueue }, protocol.TypeAcquired); err != nil {
		return nil, nil, nil, err
	}
	// The margin leaves room for the witnesses, the honest clients and
	// the proxy's two descriptors a connection: at this process's limit
	// the proxy cannot accept, and the slow witnesses fail.
	here := min(n, max(0, fdRoom(1<<30)-e.cfg.churners-harnessMargin))
	more, err := holders(attacker, here, func(int) string { return silentQueue }, protocol.TypeWaiting)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("queue %d silent waiters: %w", here, err)
	}
	a.waiters = append(a.waiters, more...)
	a.queued = 1 + here
	for left := n - here; left > 0; left -= childWaiters {
		ch, err := startWaiterChild(e, attacker, min(left, childWaiters), shape.heartbeat)
		if err != nil {
			return nil, nil, nil, err
		}
		a.children = append(a.children, ch)
		a.queued += min(left, childWaiters)
	}

	ctx, cancel := context.WithCancel(context.Background())
	a.stop = cancel
	if shape.heartbeat > 0 {
		a.done.Go(func() { heartbeatSlowly(ctx, a.waiters[1:], shape.heartbeat) })
	}
	churn, err := wire.Options{From: attackSource}.Dialer(time.Second)
	if err != nil {
		return nil, nil, nil, err
	}
	a.done.Go(func() {
		fleet(ctx, e.cfg.churners, func(ctx context.Context, _ int) {
			c, err := churn.DialContext(ctx, "tcp", a.srv.Addr)
			if err != nil {
				pause(ctx, 100*time.Millisecond)
				return
			}
			a.opened.Add(1)
			awaitClose(ctx, c)
			_ = c.Close()
		})
	})
	// The window starts once the churners fill the rest, and for aged
	// waiters once they have been silent past the limit.
	pause(context.Background(), shape.age)
	a.watched = []*witnesses{watch(a.direct), watch(a.slow)}
	return a, a.watched, a.close, nil
}

func (a *waitersAttack) close() {
	if a.stop != nil {
		a.stop()
		a.done.Wait()
	}
	closeAll(a.waiters)
	for _, ch := range a.children {
		_ = ch.Close(5 * time.Second)
	}
	if a.proxy != nil {
		_ = a.proxy.Close()
	}
	if a.srv != nil {
		_ = a.srv.Stop()
	}
}

// openDescriptors counts the descriptors process pid has open.
func openDescriptors(pid int) (int, error) {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, fmt.Errorf("count the server's descriptors: %w", err)
	}
	return len(fds), nil
}

// honestTally counts one kind of honest client's attempts.
type honestTally struct {
	mu    sync.Mutex
	took  []time.Duration // of the successes
	tries int
	why   string // the first failure
}

func (h *honestTally) note(d time.Duration, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tries++
	if err != nil {
		if h.why == "" {
			h.why = err.Error()
		}
		return
	}
	h.took = append(h.took, d)
}

func (h *honestTally) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.tries == 0 {
		return "none tried"
	}
	s := fmt.Sprintf("%d of %d (%.1f %%)", len(h.took), h.tries, 100*float64(len(h.took))/float64(h.tries))
	if len(h.took) > 0 {
		slices.Sort(h.took)
		s += fmt.Sprintf(", p50 %v, p99 %v", h.took[len(h.took)/2].Round(time.Millisecond), h.took[len(h.took)*99/100].Round(time.Millisecond))
	}
	if h.why != "" {
		s += "; first failure: " + h.why
	}
	return s
}

// honestTake connects to t, sends ACQUIRE for a fresh lock and waits for
// ACQUIRED, all within honestBound of the connect.
func honestTake(t target, name string) (time.Duration, error) {
	start := time.Now()
	c, err := wire.Dial(t.addr, wire.Options{TLS: t.tls, Safety: honestBound})
	if err != nil {
		return 0, err
	}
	defer func() { _ = c.NC.Close() }()
	if err := c.SendErr(protocol.AppendAcquire(nil, 10_000, name)); err != nil {
		return 0, fmt.Errorf("ACQUIRE: %w", err)
	}
	f, err := c.ReadUntilErr(start.Add(honestBound))
	if err == nil && f.Type != protocol.TypeAcquired {
		err = fmt.Errorf("ACQUIRE answered %v, want ACQUIRED", f)
	}
	if err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// httpProbeLoops is how many loops ask the limited server's ops and admin
// ports, each on a fresh connection, over and over during the attack.
const httpProbeLoops = 4

func runSilentWaiters(ctx context.Context, e *env, a *waitersAttack) string {
	var direct, slow honestTally
	var ops, admin probeTally
	var seq atomic.Int64
	var probing sync.WaitGroup
	probing.Go(func() {
		hc := &http.Client{Timeout: readyTimeout, Transport: &http.Transport{DisableKeepAlives: true}}
		fleet(ctx, 2*httpProbeLoops, func(ctx context.Context, i int) {
			url, tally := "http://"+a.srv.OpsAddr+"/readyz", &ops
			if i%2 == 1 {
				url, tally = "http://"+a.srv.AdminAddr+"/api/info", &admin
			}
			tally.note(httpGet(hc, url))
			pause(ctx, 20*time.Millisecond)
		})
	})
	defer probing.Wait()
	fleet(ctx, 2*honestLoops, func(ctx context.Context, i int) {
		t, tally := a.direct, &direct
		if i%2 == 1 {
			t, tally = a.slow, &slow
			if t.tls != nil && i%4 == 1 { // half the slow TLS clients speak 1.3
				t.tls = t.tls.Clone()
				t.tls.MaxVersion = tls.VersionTLS13
			}
		}
		tally.note(honestTake(t, fmt.Sprintf("adversarial/honest/%d", seq.Add(1))))
		pause(ctx, 100*time.Millisecond)
	})
	probing.Wait()
	// What the honest clients and the HTTP probes saw counts as the
	// witnesses' probes and /readyz probes do: any failure is a violation.
	a.watched[0].record(func(w *window) {
		for _, h := range []*honestTally{&direct, &slow} {
			h.mu.Lock()
			w.probes += h.tries
			w.probesFailed += h.tries - len(h.took)
			if w.probeWhy == "" && h.why != "" {
				w.probeWhy = "honest client: " + h.why
			}
			h.mu.Unlock()
		}
		for _, p := range []*probeTally{&ops, &admin} {
			w.ready += int(p.tries.Load())
			w.readyFailed += int(p.failed.Load())
			if why := p.why.Load(); w.readyWhy == "" && why != nil {
				w.readyWhy = "fresh-connection request: " + *why
			}
		}
	})
	return fmt.Sprintf("%d descriptors: %d waiters (%s), %d churners (%d opened); honest within %v: direct %v; at 150 ms RTT %v; fresh-connection requests failed: ops %v, admin %v",
		e.cfg.waitersNofile, a.queued-1, a.shape.name, e.cfg.churners, a.opened.Load(), honestBound, &direct, &slow, &ops, &admin)
}

// probeTally counts HTTP requests and their failures.
type probeTally struct {
	tries, failed atomic.Int64
	why           atomic.Pointer[string]
}

func (p *probeTally) note(err error) {
	p.tries.Add(1)
	if err != nil {
		p.failed.Add(1)
		why := err.Error()
		p.why.CompareAndSwap(nil, &why)
	}
}

func (p *probeTally) String() string {
	s := fmt.Sprintf("%d of %d", p.failed.Load(), p.tries.Load())
	if why := p.why.Load(); why != nil {
		s += " (first: " + *why + ")"
	}
	return s
}

// httpGet asks for url; anything but a 200 is an error.
func httpGet(hc *http.Client, url string) error {
	resp, err := hc.Get(url)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}
