package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/monolock/monolock/internal/testsupport/fdbudget"
	"github.com/monolock/monolock/internal/testsupport/proc"
	"github.com/monolock/monolock/internal/testsupport/tlsrecord"
	"github.com/monolock/monolock/internal/testsupport/wire"
	"github.com/monolock/monolock/protocol"

	"github.com/monolock/monolock/internal/testsupport/poll"
)

// An attack prepares what it needs (connections that take a while to open,
// a server of its own with extra witnesses), then runs until ctx ends and
// says in a few words what it did. What prepare made reaches run as a
// value prepare returns and run takes (see withState), never through a
// package variable.
type attack struct {
	n     int
	name  string
	start func(e *env) (prepared, error)
}

// prepared is an attack ready to run: run is bound to what its prepare
// made, extra watches the servers of its own, and stop (nil: nothing)
// undoes what prepare made once run has returned.
type prepared struct {
	run   func(ctx context.Context) string
	extra []*witnesses
	stop  func()
}

// withState is an attack whose prepare returns state S for its run, the
// witnesses of any server of its own, and what to stop after the run.
func withState[S any](n int, name string,
	prepare func(e *env) (state S, extra []*witnesses, stop func(), err error),
	run func(ctx context.Context, e *env, state S) string,
) attack {
	return attack{n: n, name: name, start: func(e *env) (prepared, error) {
		state, extra, stop, err := prepare(e)
		if err != nil {
			return prepared{}, err
		}
		return prepared{run: func(ctx context.Context) string { return run(ctx, e, state) }, extra: extra, stop: stop}, nil
	}}
}

// stateless is an attack that needs no preparing.
func stateless(n int, name string, run func(ctx context.Context, e *env) string) attack {
	return attack{n: n, name: name, start: func(e *env) (prepared, error) {
		return prepared{run: func(ctx context.Context) string { return run(ctx, e) }}, nil
	}}
}

var attacks = []attack{
	withState(1, "admin reads of a long queue", prepareLongQueue, runLongQueueReads),
	stateless(2, "silent TLS sockets", runSilentTLS),
	stateless(3, "slow HTTP clients", runSlowHTTP),
	stateless(4, "KeyUpdate floods", runKeyUpdates),
	stateless(5, "non-reading pipeliners", runPipeliners),
	withState(6, "expensive ?match=", prepareManyNames, runExpensiveMatch),
	stateless(7, "half-sent TLS handshake messages", runHalfSentTLS),
	withState(8, "descriptor exhaustion with mTLS", prepareLimitedServer, runExhaustion),
	withState(9, "silent waiters and churners at the limit, plain", prepareSilentWaitersPlain, runSilentWaiters),
	withState(10, "silent waiters and churners at the limit, mTLS", prepareSilentWaitersMTLS, runSilentWaiters),
	withState(11, "forged client chains", prepareForgedChain, runForgedChains),
	withState(12, "client certificates with 1,000 SANs", prepareManySANs, runManySANs),
	withState(13, "50 consoles on 10,000 locks", prepareConsoleLocks, runConsoles),
	withState(14, "DNS rebinding", prepareRebinding, runRebinding),
	withState(15, "a client not reading a full listing", prepareLongListing, runNonReader),
	withState(16, "full listings ten times a second", prepareLongListing, runFullPollers),
	stateless(17, "FIFOs and 256 MiB files at reloaded paths", runReloads),
	withState(18, "young silent waiters and churners at the limit, plain", prepareYoungWaitersPlain, runSilentWaiters),
	withState(19, "young silent waiters and churners at the limit, mTLS", prepareYoungWaitersMTLS, runSilentWaiters),
	withState(20, "slow heartbeaters and churners at the limit, plain", prepareSlowHeartbeatersPlain, runSilentWaiters),
	withState(21, "slow heartbeaters and churners at the limit, mTLS", prepareSlowHeartbeatersMTLS, runSilentWaiters),
}

// fleet runs n copies of f until ctx ends and waits for them.
func fleet(ctx context.Context, n int, f func(ctx context.Context, i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				f(ctx, i)
			}
		})
	}
	wg.Wait()
}

// closeWith closes c when ctx ends; call the result when done with c.
func closeWith(ctx context.Context, c io.Closer) func() bool {
	return context.AfterFunc(ctx, func() { _ = c.Close() })
}

// pause sleeps d or until ctx ends; it reports whether ctx is still live.
func pause(ctx context.Context, d time.Duration) bool { return poll.Sleep(ctx, d) == nil }

// awaitClose reads c until the server closes it or ctx ends.
func awaitClose(ctx context.Context, c net.Conn) {
	defer closeWith(ctx, c)()
	_, _ = io.Copy(io.Discard, c)
}

// holders opens n connections on t in parallel, each taking name(i) with
// a long lease and expecting want (WAITING or ACQUIRED).
func holders(t target, n int, name func(i int) string, want protocol.Type) ([]*wire.Conn, error) {
	conns := make([]*wire.Conn, n)
	var next atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				c, err := wire.Dial(t.addr, wire.Options{TLS: t.tls, Safety: 30 * time.Second, From: t.from})
				if err == nil {
					var f wire.Frame
					if f, err = c.RequestErr(protocol.AppendAcquire(nil, 600_000, name(i))); err == nil && f.Type != want {
						err = fmt.Errorf("ACQUIRE %s: got %v", name(i), f)
					}
					if err != nil {
						_ = c.NC.Close()
					}
				}
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				conns[i] = c
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		closeAll(conns)
		return nil, firstErr
	}
	return conns, nil
}

func closeAll(conns []*wire.Conn) {
	for _, c := range conns {
		if c != nil {
			_ = c.NC.Close()
		}
	}
}

// fdRoom is how many more connections this process may open, with a margin.
func fdRoom(want int) int {
	n, err := fdbudget.Fit(want, 1, 2048)
	if err != nil {
		return want
	}
	return max(1, n)
}

// --- 1: admin reads of a long queue -----------------------------------------

const longQueueLock = "adversarial/long-queue"

// prepareLongQueue returns the waiters it queued.
func prepareLongQueue(e *env) ([]*wire.Conn, []*witnesses, func(), error) {
	h, err := holders(e.tPlain, 1, func(int) string { return longQueueLock }, protocol.TypeAcquired)
	if err != nil {
		return nil, nil, nil, err
	}
	ws, err := holders(e.tPlain, fdRoom(10_000), func(int) string { return longQueueLock }, protocol.TypeWaiting)
	if err != nil {
		closeAll(h)
		return nil, nil, nil, err
	}
	return ws, nil, func() { closeAll(ws); closeAll(h) }, nil
}

func runLongQueueReads(ctx context.Context, e *env, longQueue []*wire.Conn) string {
	u := "http://" + e.plain.AdminAddr + "/api/locks/" + url.PathEscape(longQueueLock)
	var ok, failed atomic.Int64
	hc := &http.Client{Timeout: 15 * time.Second}
	fleet(ctx, 16, func(ctx context.Context, _ int) {
		req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
		resp, err := hc.Do(req)
		if err != nil {
			if ctx.Err() == nil {
				failed.Add(1)
			}
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			ok.Add(1)
		} else {
			failed.Add(1)
		}
	})
	return fmt.Sprintf("%d reads of a %d-waiter queue answered, %d failed", ok.Load(), len(longQueue), failed.Load())
}

// --- 2: silent TLS sockets --------------------------------------------------

// clientHelloStart is the first 11 bytes of a ClientHello record.
var clientHelloStart = []byte{0x16, 0x03, 0x01, 0x00, 0xc8, 0x01, 0x00, 0x00, 0xc4, 0x03, 0x03}

func runSilentTLS(ctx context.Context, e *env) string {
	var opened atomic.Int64
	fleet(ctx, 640, func(ctx context.Context, _ int) {
		c, err := net.DialTimeout("tcp", e.tMTLS.addr, time.Second)
		if err != nil {
			pause(ctx, 100*time.Millisecond)
			return
		}
		opened.Add(1)
		_, _ = c.Write(clientHelloStart)
		awaitClose(ctx, c)
		_ = c.Close()
	})
	return fmt.Sprintf("640 sockets at a time, %d opened", opened.Load())
}

// --- 3: slow HTTP clients ---------------------------------------------------

func runSlowHTTP(ctx context.Context, e *env) string {
	ports := []string{e.plain.OpsAddr, e.mtls.OpsAddr, e.plain.AdminAddr}
	var opened atomic.Int64
	fleet(ctx, 300*len(ports), func(ctx context.Context, i int) {
		c, err := net.DialTimeout("tcp", ports[i%len(ports)], time.Second)
		if err != nil {
			pause(ctx, 100*time.Millisecond)
			return
		}
		opened.Add(1)
		defer closeWith(ctx, c)()
		defer c.Close()
		header := "GET /readyz HTTP/1.1\r\nHost: monolock\r\nX-Slow: " + strings.Repeat("a", 64)
		for i := 0; ; i++ {
			if _, err := c.Write([]byte{header[i%len(header)]}); err != nil {
				return
			}
			if !pause(ctx, time.Second) {
				return
			}
		}
	})
	return fmt.Sprintf("300 sockets on each of 3 HTTP ports, a header byte a second, %d opened", opened.Load())
}

// --- 4: KeyUpdate floods ----------------------------------------------------

func runKeyUpdates(ctx context.Context, e *env) string {
	var updates, closed, failed atomic.Int64
	const burst = 128 << 10
	fleet(ctx, 80, func(ctx context.Context, i int) {
		raw, w, err := tlsrecord.Dial(e.tMTLS.addr, e.tMTLS.tls, 5*time.Second)
		if err != nil {
			failed.Add(1)
			pause(ctx, 200*time.Millisecond)
			return
		}
		defer closeWith(ctx, raw)()
		defer raw.Close()
		gone := make(chan struct{}) // the server closed the connection
		// Read the answers to the heartbeats until the close.
		go func() {
			_, _ = io.Copy(io.Discard, raw)
			close(gone)
		}()
		out := w.AppendRecord(nil, tlsrecord.ContentApplication, protocol.AppendAcquire(nil, 600_000, fmt.Sprintf("adversarial/keyupdate/%d", i)))
		for {
			// A burst goes out in pieces of 16 KiB, each encrypted just
			// before it is written, and stops once the server has closed the
			// connection: an attacker cannot make the server read more than
			// that, and records encrypted for a closed socket would only
			// load this process, which shares the cores with the witnesses.
			for sent, n := 0, 0; sent < burst; {
				select {
				case <-gone:
					if ctx.Err() == nil {
						closed.Add(1)
					}
					return
				default:
				}
				for len(out) < burst/8 {
					if n++; n%8 == 0 { // crypto/tls gives up after 16 records without application data
						out = w.AppendRecord(out, tlsrecord.ContentApplication, protocol.AppendHeartbeat(nil))
						continue
					}
					if out, err = w.AppendKeyUpdate(out); err != nil {
						failed.Add(1)
						return
					}
					updates.Add(1)
				}
				if _, err := raw.Write(out); err != nil {
					if ctx.Err() == nil {
						closed.Add(1)
					}
					return
				}
				sent += len(out)
				out = out[:0]
			}
			if !pause(ctx, 4*time.Second) {
				return
			}
		}
	})
	return fmt.Sprintf("80 sessions, 128 KiB bursts every 4 s: %d KeyUpdates sent, %d sessions closed by the server, %d handshakes failed", updates.Load(), closed.Load(), failed.Load())
}

// --- 5: non-reading pipeliners ----------------------------------------------

func runPipeliners(ctx context.Context, e *env) string {
	var closed atomic.Int64
	chunk := bytes.Repeat(protocol.AppendHeartbeat(nil), 64<<10)
	fleet(ctx, 20, func(ctx context.Context, i int) {
		c, err := net.DialTimeout("tcp", e.tPlain.addr, time.Second)
		if err != nil {
			pause(ctx, 100*time.Millisecond)
			return
		}
		defer closeWith(ctx, c)()
		defer c.Close()
		if _, err := c.Write(protocol.AppendAcquire(nil, 600_000, fmt.Sprintf("adversarial/pipeliner/%d", i))); err != nil {
			return
		}
		for sent := 0; sent < 400_000; sent += len(chunk) {
			if _, err := c.Write(chunk); err != nil {
				if ctx.Err() == nil {
					closed.Add(1)
				}
				return
			}
		}
		for pause(ctx, 500*time.Millisecond) { // idle, never reading; a write fails once closed
			if _, err := c.Write(protocol.AppendHeartbeat(nil)); err != nil {
				closed.Add(1)
				return
			}
		}
	})
	return fmt.Sprintf("20 holders pipelining 400,000 heartbeats each, never reading: %d closed by the server", closed.Load())
}

// --- 6: expensive ?match= ---------------------------------------------------

// prepareManyNames returns the holders of the names.
func prepareManyNames(e *env) ([]*wire.Conn, []*witnesses, func(), error) {
	prefix := strings.Repeat("a", protocol.MaxNameLen-6)
	hs, err := holders(e.tPlain, fdRoom(4_000), func(i int) string { return fmt.Sprintf("%s%06d", prefix, i) }, protocol.TypeAcquired)
	if err != nil {
		return nil, nil, nil, err
	}
	return hs, nil, func() { closeAll(hs) }, nil
}

func runExpensiveMatch(ctx context.Context, e *env, manyNames []*wire.Conn) string {
	pattern := "*" + strings.Repeat("?", 200) + "b*"
	u := "http://" + e.plain.AdminAddr + "/api/locks?match=" + url.QueryEscape(pattern)
	var mu sync.Mutex
	codes := map[string]int{}
	hc := &http.Client{Timeout: 35 * time.Second}
	fleet(ctx, 64, func(ctx context.Context, _ int) {
		req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
		resp, err := hc.Do(req)
		what := "error"
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			what = fmt.Sprint(resp.StatusCode)
		} else if ctx.Err() != nil {
			return
		}
		mu.Lock()
		codes[what]++
		mu.Unlock()
	})
	return fmt.Sprintf("64 clients over %d held 255-byte names, answers %v", len(manyNames), codes)
}

// --- 7: half-sent TLS handshake messages ------------------------------------

func runHalfSentTLS(ctx context.Context, e *env) string {
	var opened, closed, failed atomic.Int64
	half := append([]byte{24, 0x00, 0xff, 0xff}, make([]byte, 16_000)...) // declares 65,535 bytes
	fleet(ctx, 500, func(ctx context.Context, i int) {
		raw, w, err := tlsrecord.Dial(e.tMTLS.addr, e.tMTLS.tls, 5*time.Second)
		if err != nil {
			failed.Add(1)
			pause(ctx, 200*time.Millisecond)
			return
		}
		opened.Add(1)
		out := w.AppendRecord(nil, tlsrecord.ContentApplication, protocol.AppendAcquire(nil, 600_000, fmt.Sprintf("adversarial/half/%d", i)))
		out = w.AppendRecord(out, tlsrecord.ContentHandshake, half)
		if _, err := raw.Write(out); err != nil {
			_ = raw.Close()
			return
		}
		awaitClose(ctx, raw)
		_ = raw.Close()
		if ctx.Err() == nil {
			closed.Add(1)
		}
	})
	return fmt.Sprintf("500 sessions at a time: %d opened, %d closed by the server, %d handshakes failed", opened.Load(), closed.Load(), failed.Load())
}

// --- 8: descriptor exhaustion with mutual TLS -------------------------------

const limitedNofile = 256

// prepareLimitedServer returns the server it started.
func prepareLimitedServer(e *env) (*proc.Process, []*witnesses, func(), error) {
	args := append([]string{"-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, limitedNofile), e.cfg.server,
		"-listen", "127.0.0.1:0", "-log-format", "json", "-log-level", "info", "-ops-listen", "127.0.0.1:0"}, e.tlsArgs...)
	p, err := proc.Start("/bin/sh", proc.Options{
		Name: "monolock (nofile 256)", Args: args, StartLine: proc.StartedMessage,
		LogFile: filepath.Join(e.dir, "limited.log"), StartTimeout: 15 * time.Second, StopGrace: 15 * time.Second, Group: e.procs,
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("start a server limited to %d descriptors: %w", limitedNofile, err)
	}
	w := watch(target{name: "mTLS-limited", addr: p.Addr, ops: p.OpsAddr, tls: e.tMTLS.tls, pid: p.Pid()})
	return p, []*witnesses{w}, func() { _ = p.Stop() }, nil
}

func runExhaustion(ctx context.Context, e *env, limited *proc.Process) string {
	var opened atomic.Int64
	fleet(ctx, 400, func(ctx context.Context, _ int) {
		c, err := net.DialTimeout("tcp", limited.Addr, time.Second)
		if err != nil {
			pause(ctx, 100*time.Millisecond)
			return
		}
		opened.Add(1)
		awaitClose(ctx, c)
		_ = c.Close()
	})
	return fmt.Sprintf("400 silent sockets against %d descriptors, %d opened", limitedNofile, opened.Load())
}
