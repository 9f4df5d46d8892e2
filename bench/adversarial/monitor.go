package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/monolock/monolock/internal/testsupport/wire"
	"github.com/monolock/monolock/protocol"
)

// The three witnesses of every attack: a canary that holds a lock on a 2 s
// lease and heartbeats every 200 ms, a prober that takes a fresh lock every
// 200 ms, and a readiness probe of /readyz with a 1 s timeout, as
// keepalived's check_monolock.sh runs it.
const (
	canaryLease     = 2 * time.Second
	canaryBeat      = 200 * time.Millisecond
	probeEvery      = 200 * time.Millisecond
	probeTimeout    = 2 * time.Second // connect, handshake, ACQUIRE, ACQUIRED
	readyEvery      = 250 * time.Millisecond
	readyTimeout    = time.Second
	witnessLockName = "adversarial/canary"
)

// target is one server the witnesses watch.
type target struct {
	name string      // "plain", "mTLS"
	addr string      // protocol port
	ops  string      // ops port
	tls  *tls.Config // nil: plain
	pid  int         // the server process, for its RSS
	from string      // the local address to connect from; "" for the system's choice
}

// window is what the witnesses saw during one attack.
type window struct {
	worstRTT     time.Duration
	canaryLost   int
	lostWhy      string
	probes       int
	probesFailed int
	probeWhy     string
	ready        int
	readyFailed  int
	readyWhy     string
	peakRSS      int64 // bytes, the most any watched server had
}

func (w *window) add(o window) {
	w.worstRTT = max(w.worstRTT, o.worstRTT)
	w.canaryLost += o.canaryLost
	w.probes += o.probes
	w.probesFailed += o.probesFailed
	w.ready += o.ready
	w.readyFailed += o.readyFailed
	w.peakRSS = max(w.peakRSS, o.peakRSS)
	if w.lostWhy == "" {
		w.lostWhy = o.lostWhy
	}
	if w.probeWhy == "" {
		w.probeWhy = o.probeWhy
	}
	if w.readyWhy == "" {
		w.readyWhy = o.readyWhy
	}
}

func (w window) violated() bool {
	return w.canaryLost > 0 || w.probesFailed > 0 || w.readyFailed > 0
}

// witnesses watch one target until close.
type witnesses struct {
	t      target
	mu     sync.Mutex
	cur    window
	closed context.Context    // ends when close is called
	end    context.CancelFunc // ends closed
	wg     sync.WaitGroup
	seq    atomic.Int64

	holding     chan struct{} // closed once the canary first holds its lock
	holdingOnce sync.Once
}

func watch(t target) *witnesses {
	w := &witnesses{t: t, holding: make(chan struct{})}
	w.closed, w.end = context.WithCancel(context.Background())
	w.wg.Add(4)
	go w.memory()
	go w.canary()
	go w.prober()
	go w.readiness()
	return w
}

// awaitCanary waits until the canary holds its lock, so that an attack's
// window never starts before it.
func (w *witnesses) awaitCanary(timeout time.Duration) error {
	select {
	case <-w.holding:
		return nil
	case <-time.After(timeout):
		w.mu.Lock()
		why := w.cur.lostWhy
		w.mu.Unlock()
		return fmt.Errorf("the canary of the %s server did not get its lock within %v (first failure: %s)", w.t.name, timeout, why)
	}
}

// take returns what was seen since the last take and starts afresh.
func (w *witnesses) take() window {
	w.mu.Lock()
	defer w.mu.Unlock()
	got := w.cur
	w.cur = window{}
	return got
}

func (w *witnesses) close() {
	w.end()
	w.wg.Wait()
}

func (w *witnesses) record(f func(*window)) {
	w.mu.Lock()
	f(&w.cur)
	w.mu.Unlock()
}

// why names the target in a failure's reason.
func (w *witnesses) why(err error) string { return w.t.name + " server: " + err.Error() }

// sleep waits d unless the witnesses are closed; it reports whether they
// are still open.
func (w *witnesses) sleep(d time.Duration) bool { return pause(w.closed, d) }

// canary holds the lock and heartbeats; a heartbeat not answered with its
// token within the lease, or any error, is a lost lock, after which it
// takes the lock again.
func (w *witnesses) canary() {
	defer w.wg.Done()
	name := fmt.Sprintf("%s/%s", witnessLockName, w.t.name)
	for {
		c, tok, err := take(w.t, name, canaryLease)
		if err != nil {
			w.record(func(win *window) {
				win.canaryLost++
				if win.lostWhy == "" {
					win.lostWhy = w.why(fmt.Errorf("cannot take the canary's lock: %w", err))
				}
			})
			if !w.sleep(canaryBeat) {
				return
			}
			continue
		}
		w.holdingOnce.Do(func() { close(w.holding) })
		err = w.heartbeat(c, tok)
		_ = c.NC.Close()
		if err == nil { // stopped
			return
		}
		w.record(func(win *window) {
			win.canaryLost++
			if win.lostWhy == "" {
				win.lostWhy = w.why(err)
			}
		})
	}
}

// heartbeat runs until stop (nil) or the lock is lost (why).
func (w *witnesses) heartbeat(c *wire.Conn, tok uint64) error {
	beat := protocol.AppendHeartbeat(nil)
	for w.sleep(canaryBeat) {
		sent := time.Now()
		if err := c.SendErr(beat); err != nil {
			return fmt.Errorf("heartbeat: %w", err)
		}
		f, err := c.ReadUntilErr(sent.Add(canaryLease))
		rtt := time.Since(sent)
		w.record(func(win *window) { win.worstRTT = max(win.worstRTT, rtt) })
		switch {
		case err != nil:
			return fmt.Errorf("heartbeat answer: %w", err)
		case f.Type != protocol.TypeAcquired || f.Token != tok:
			return fmt.Errorf("heartbeat answered %v, want ACQUIRED %d", f, tok)
		}
	}
	return nil
}

// take connects and takes the free lock name.
func take(t target, name string, lease time.Duration) (*wire.Conn, uint64, error) {
	start := time.Now()
	c, err := wire.Dial(t.addr, wire.Options{TLS: t.tls, Safety: probeTimeout})
	if err != nil {
		return nil, 0, err
	}
	if err := c.SendErr(protocol.AppendAcquire(nil, uint32(lease/time.Millisecond), name)); err != nil {
		_ = c.NC.Close()
		return nil, 0, fmt.Errorf("ACQUIRE: %w", err)
	}
	f, err := c.ReadUntilErr(start.Add(probeTimeout))
	if err == nil && f.Type != protocol.TypeAcquired {
		err = fmt.Errorf("ACQUIRE %s answered %v, want ACQUIRED", name, f)
	}
	if err != nil {
		_ = c.NC.Close()
		return nil, 0, err
	}
	return c, f.Token, nil
}

// prober takes a fresh lock and lets it go, over and over.
func (w *witnesses) prober() {
	defer w.wg.Done()
	for w.sleep(probeEvery) {
		name := fmt.Sprintf("adversarial/probe/%s/%d", w.t.name, w.seq.Add(1))
		c, _, err := take(w.t, name, canaryLease)
		if c != nil {
			_ = c.NC.Close()
		}
		w.record(func(win *window) {
			win.probes++
			if err != nil {
				win.probesFailed++
				if win.probeWhy == "" {
					win.probeWhy = w.why(err)
				}
			}
		})
	}
}

// readiness probes /readyz on a fresh connection each time.
func (w *witnesses) readiness() {
	defer w.wg.Done()
	hc := &http.Client{Timeout: readyTimeout, Transport: &http.Transport{DisableKeepAlives: true}}
	for w.sleep(readyEvery) {
		resp, err := hc.Get("http://" + w.t.ops + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("/readyz: %s", resp.Status)
			}
		}
		w.record(func(win *window) {
			win.ready++
			if err != nil {
				win.readyFailed++
				if win.readyWhy == "" {
					win.readyWhy = w.why(err)
				}
			}
		})
	}
}

// memory samples the server's resident set.
func (w *witnesses) memory() {
	defer w.wg.Done()
	for w.sleep(100 * time.Millisecond) {
		if rss := residentBytes(w.t.pid); rss > 0 {
			w.record(func(win *window) { win.peakRSS = max(win.peakRSS, rss) })
		}
	}
}

// residentBytes reads VmRSS of pid; 0 when it cannot.
func residentBytes(pid int) int64 { return procStatusKB(pid, "VmRSS:") }

// procStatusKB reads a field in kB of /proc/pid/status, in bytes; 0 when it
// cannot.
func procStatusKB(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb); err == nil {
				return kb << 10
			}
		}
	}
	return 0
}
