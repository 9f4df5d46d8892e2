package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/monolock/monolock/internal/testsupport/proc"
	"github.com/monolock/monolock/internal/testsupport/wire"
	"github.com/monolock/monolock/protocol"
)

// The adversarial tests run the real binary with a short io-timeout and
// attack it the ways a hostile or broken client would, one attack per
// subtest, while a well-behaved client holds a lock throughout. Every wait is
// bounded. The one rule about time checked here is the server's own: a
// connection is never closed before io-timeout. The rule's exact boundary is
// tested with an injected clock in eventloop; here a close that has not come
// advSafety after io-timeout is a hang, not a slow answer.
const (
	advIOTimeout = time.Second
	// advSafety bounds a wait for something that normally takes at most
	// milliseconds: past it the server is stuck.
	advSafety = 10 * time.Second

	// The well-behaved client: a 2 s lease, a heartbeat every 500 ms.
	advGoodLease = 2 * time.Second
	advGoodBeat  = 500 * time.Millisecond
	advGoodLock  = "adversarial/good"

	advLongLease = 60_000 // ms; no attack outlives it
)

// advConnBudget returns how many connections an attack may hold open at once:
// each costs a descriptor here and one in the server, whose limit is ours.
func advConnBudget(t *testing.T, want int) int {
	t.Helper()
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatalf("getrlimit: %v", err)
	}
	room := int(rl.Cur) - 512
	if room < want {
		t.Logf("RLIMIT_NOFILE is %d: using %d connections instead of %d", rl.Cur, max(room, 1), want)
		return max(room, 1)
	}
	return want
}

func TestAdversarialClients(t *testing.T) {
	p := startServer(t, "-io-timeout", advIOTimeout.String())
	pid := p.Pid()

	good := startGoodClient(t, p.Addr)
	baseFDs := openDescriptors(t, pid)
	baseRSS := vmRSS(t, pid)
	t.Logf("server pid %d: %d descriptors, VmRSS %s with the well-behaved client connected", pid, baseFDs, mib(baseRSS))

	t.Run("SlowDrip", func(t *testing.T) { advSlowDrip(t, p.Addr, good) })
	t.Run("NeverSend", func(t *testing.T) { advNeverSend(t, p.Addr, good) })
	t.Run("HeartbeatFlood", func(t *testing.T) { advFlood(t, p.Addr, pid, good) })
	t.Run("Garbage", func(t *testing.T) { advGarbage(t, p.Addr, good) })
	t.Run("ResetStorm", func(t *testing.T) { advResetStorm(t, p.Addr, good) })
	t.Run("GiantNameLength", func(t *testing.T) { advGiantNameLength(t, p.Addr, good) })

	// The well-behaved client was served throughout and still holds its lock.
	good.finish(t)
	probe, err := advDial(p.Addr)
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	if f, err := probe.RequestErr(protocol.AppendAcquire(nil, advLongLease, advGoodLock)); err != nil || f.Type != protocol.TypeWaiting {
		t.Errorf("a second client on %q got %s, %v; want WAITING (the lock still held)", advGoodLock, f, err)
	}
	_ = probe.NC.Close()

	// The server is alive, and every adversarial connection is gone.
	select {
	case <-p.Done():
		t.Fatalf("the server exited: %v", p.Err())
	default:
	}
	if err := p.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the server died: %v", err)
	}
	const fdSlack = 4
	deadline := time.Now().Add(20 * time.Second)
	fds := openDescriptors(t, pid)
	for fds > baseFDs+fdSlack && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		fds = openDescriptors(t, pid)
	}
	if fds > baseFDs+fdSlack {
		t.Errorf("the server holds %d descriptors, %d at the start: adversarial connections left behind", fds, baseFDs)
	}
	advCheckLogs(t, p)
	endRSS := vmRSS(t, pid)
	t.Logf("at the end: %d descriptors (baseline %d), VmRSS %s (%+.1f MiB since the start)",
		fds, baseFDs, mib(endRSS), float64(endRSS-baseRSS)/(1<<20))
	good.close()
}

// --- the well-behaved client ---

// goodClient holds advGoodLock and heartbeats on raw frames in a goroutine
// for the whole test, checking every answer.
type goodClient struct {
	conn  *wire.Conn
	token uint64
	stop  chan struct{}
	done  chan struct{}

	mu      sync.Mutex
	samples []rttSample
	maxGap  time.Duration // longest time between two answered heartbeats
	err     error         // the first failure; the goroutine stops on it
}

type rttSample struct {
	at  time.Time
	rtt time.Duration
}

func startGoodClient(t *testing.T, addr string) *goodClient {
	t.Helper()
	conn, err := advDial(addr)
	if err != nil {
		t.Fatalf("well-behaved client: %v", err)
	}
	f, err := conn.RequestErr(protocol.AppendAcquire(nil, uint32(advGoodLease/time.Millisecond), advGoodLock))
	if err != nil || f.Type != protocol.TypeAcquired {
		_ = conn.NC.Close()
		t.Fatalf("well-behaved client: ACQUIRE answered %s, %v", f, err)
	}
	g := &goodClient{conn: conn, token: f.Token, stop: make(chan struct{}), done: make(chan struct{})}
	t.Cleanup(func() { g.halt(); _ = conn.NC.Close() })
	go g.run()
	return g
}

func (g *goodClient) run() {
	defer close(g.done)
	tick := time.NewTicker(advGoodBeat)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-g.stop:
			return
		case <-tick.C:
		}
		start := time.Now()
		// The answer must come before the lease runs out, or the lock may be
		// gone by the time a real client would know.
		_ = g.conn.NC.SetWriteDeadline(start.Add(advGoodLease))
		var f wire.Frame
		_, err := g.conn.NC.Write(wire.Heartbeat)
		if err == nil {
			f, err = g.conn.ReadUntilErr(start.Add(advGoodLease))
		}
		now := time.Now()
		g.mu.Lock()
		switch {
		case err != nil:
			g.err = fmt.Errorf("heartbeat at %s: %w (after %v)", start.Format(time.RFC3339Nano), err, now.Sub(start))
		case f.Type != protocol.TypeAcquired || f.Token != g.token:
			g.err = fmt.Errorf("heartbeat answered %s, want ACQUIRED(%d)", f, g.token)
		default:
			g.samples = append(g.samples, rttSample{at: start, rtt: now.Sub(start)})
			g.maxGap = max(g.maxGap, now.Sub(last))
			last = now
		}
		failed := g.err != nil
		g.mu.Unlock()
		if failed {
			return
		}
	}
}

// check fails t if the client has failed, and logs its worst answer since.
func (g *goodClient) check(t *testing.T, since time.Time) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err != nil {
		t.Fatalf("well-behaved client: %v", g.err)
	}
	var worst time.Duration
	n := 0
	for _, s := range g.samples {
		if !s.at.Before(since) {
			worst = max(worst, s.rtt)
			n++
		}
	}
	t.Logf("well-behaved client meanwhile: %d heartbeats answered with its token, worst RTT %v", n, worst)
}

func (g *goodClient) halt() {
	select {
	case <-g.stop:
	default:
		close(g.stop)
	}
	<-g.done
}

// finish stops the heartbeats, checks the record and one last heartbeat.
func (g *goodClient) finish(t *testing.T) {
	t.Helper()
	g.halt()
	if g.err != nil {
		t.Fatalf("well-behaved client: %v", g.err)
	}
	rtts := make([]time.Duration, len(g.samples))
	for i, s := range g.samples {
		rtts[i] = s.rtt
	}
	slices.Sort(rtts)
	if len(rtts) == 0 {
		t.Fatal("well-behaved client: no heartbeat answered")
	}
	t.Logf("well-behaved client: %d heartbeats, every one answered ACQUIRED(%d); RTT median %v, p99 %v, worst %v; longest gap between answers %v (lease %v)",
		len(rtts), g.token, rtts[len(rtts)/2], rtts[len(rtts)*99/100], rtts[len(rtts)-1], g.maxGap, advGoodLease)
	if g.maxGap >= advGoodLease {
		t.Errorf("well-behaved client: %v between two answered heartbeats, a whole lease", g.maxGap)
	}
	f, err := g.conn.RequestErr(wire.Heartbeat)
	if err != nil || f.Type != protocol.TypeAcquired || f.Token != g.token {
		t.Fatalf("well-behaved client: last heartbeat answered %s, %v; want ACQUIRED(%d): the lock was lost", f, err, g.token)
	}
}

func (g *goodClient) close() { _ = g.conn.NC.Close() }

// --- (a) slow drip ---

// advSlowDrip: connections that send an ACQUIRE one byte per second are
// closed once io-timeout has passed since they were accepted, never before.
func advSlowDrip(t *testing.T, addr string, good *goodClient) {
	since := time.Now()
	n := advConnBudget(t, 200)
	// A 58-byte ACQUIRE would take almost a minute at this pace. The first
	// byte leaves 250 ms after the connect so that no byte crosses the close
	// at io-timeout: the close is a FIN, seen as EOF.
	frame := protocol.AppendAcquire(nil, advLongLease, strings.Repeat("d", 50))
	const phase = 250 * time.Millisecond
	type result struct {
		closedAfter time.Duration
		sent        int
		err         error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			start := time.Now()
			conn, err := advDial(addr)
			if err != nil {
				results[i].err = err
				return
			}
			defer conn.NC.Close()
			buf := make([]byte, 64)
			next := start.Add(phase)
			for sent := 0; ; sent++ {
				// Wait for the next byte's time, watching for the close.
				_ = conn.NC.SetReadDeadline(next)
				m, err := conn.NC.Read(buf)
				switch {
				case m > 0:
					results[i] = result{err: fmt.Errorf("got %x after %d bytes of an ACQUIRE, want no frame", buf[:m], sent)}
					return
				case errors.Is(err, io.EOF):
					results[i] = result{closedAfter: time.Since(start), sent: sent}
					return
				case !errors.Is(err, os.ErrDeadlineExceeded):
					results[i] = result{err: fmt.Errorf("after %d bytes and %v: %w, want EOF", sent, time.Since(start), err)}
					return
				}
				if time.Since(start) > advIOTimeout+advSafety {
					results[i] = result{err: fmt.Errorf("still open after %d bytes and %v, io-timeout %v: the server never closed it", sent, time.Since(start), advIOTimeout)}
					return
				}
				_ = conn.NC.SetWriteDeadline(time.Now().Add(advSafety))
				if _, err := conn.NC.Write(frame[sent : sent+1]); err != nil {
					results[i] = result{err: fmt.Errorf("write byte %d: %w", sent, err)}
					return
				}
				next = next.Add(time.Second)
			}
		})
	}
	wg.Wait()
	times := make([]time.Duration, 0, n)
	sent := 0
	for i, r := range results {
		if r.err != nil {
			t.Errorf("drip %d: %v", i, r.err)
			continue
		}
		if r.closedAfter < advIOTimeout {
			t.Errorf("drip %d: closed %v after connecting, before io-timeout %v", i, r.closedAfter, advIOTimeout)
		}
		times = append(times, r.closedAfter)
		sent = max(sent, r.sent)
	}
	t.Logf("%d slow-drip connections: %d closed (EOF), at most %d bytes sent each; %s", n, len(times), sent, advDurations("closed after connect", times))
	good.check(t, since)
}

// --- (b) connections that never send ---

func advNeverSend(t *testing.T, addr string, good *goodClient) {
	since := time.Now()
	n := advConnBudget(t, 3000)
	const batch = 250
	type result struct {
		closedAfter time.Duration
		err         error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	opening := time.Now()
	for from := 0; from < n; from += batch {
		var dialed sync.WaitGroup
		for i := from; i < min(from+batch, n); i++ {
			dialed.Add(1)
			wg.Go(func() {
				start := time.Now()
				conn, err := advDial(addr)
				dialed.Done()
				if err != nil {
					results[i].err = err
					return
				}
				defer conn.NC.Close()
				_ = conn.NC.SetReadDeadline(start.Add(advIOTimeout + advSafety))
				var b [1]byte
				m, err := conn.NC.Read(b[:])
				switch {
				case m > 0:
					results[i].err = fmt.Errorf("got %x, want no frame", b[:m])
				case errors.Is(err, io.EOF):
					results[i].closedAfter = time.Since(start)
				default:
					results[i].err = fmt.Errorf("after %v: %w, want EOF", time.Since(start), err)
				}
			})
		}
		dialed.Wait()
	}
	opened := time.Since(opening)
	wg.Wait()
	times := make([]time.Duration, 0, n)
	failed := 0
	for i, r := range results {
		switch {
		case r.err != nil:
			if failed++; failed <= 10 {
				t.Errorf("silent connection %d: %v", i, r.err)
			}
		case r.closedAfter < advIOTimeout:
			t.Errorf("silent connection %d: closed %v after connecting, before io-timeout %v", i, r.closedAfter, advIOTimeout)
		default:
			times = append(times, r.closedAfter)
		}
	}
	if failed > 10 {
		t.Errorf("... %d silent connections failed in all", failed)
	}
	t.Logf("%d silent connections opened in %v in batches of %d: %d closed (EOF); %s", n, opened.Round(time.Millisecond), batch, len(times), advDurations("closed after connect", times))
	good.check(t, since)
}

// --- (c) heartbeat flood without reading ---

func advFlood(t *testing.T, addr string, pid int, good *goodClient) {
	since := time.Now()
	conn, err := advDial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.NC.Close()
	if f, err := conn.RequestErr(protocol.AppendAcquire(nil, advLongLease, "adversarial/flood")); err != nil || f.Type != protocol.TypeAcquired {
		t.Fatalf("flooder: ACQUIRE answered %s, %v", f, err)
	}

	before := vmRSS(t, pid)
	peak := before
	sampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() { // the server's RSS every 20 ms during the flood
		defer close(sampled)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-sampling:
				return
			case <-tick.C:
				if rss, err := readVmRSS(pid); err == nil {
					peak = max(peak, rss)
				}
			}
		}
	}()

	const (
		chunk = 64 << 10
		limit = 64 << 20
	)
	hb := bytes.Repeat(protocol.AppendHeartbeat(nil), chunk)
	start := time.Now()
	written := 0
	var werr error
	for written < limit {
		// A slow server may take longer than the deadline for a chunk; that is
		// fine while it makes progress. A write that moves nothing for the
		// whole deadline means the server stopped reading without closing.
		_ = conn.NC.SetWriteDeadline(time.Now().Add(advSafety))
		m, err := conn.NC.Write(hb)
		written += m
		if err != nil && (m == 0 || !errors.Is(err, os.ErrDeadlineExceeded)) {
			werr = err
			break
		}
	}
	took := time.Since(start)
	after := vmRSS(t, pid)
	close(sampling)
	<-sampled
	peak = max(peak, after)
	rise, peakRise := after-before, peak-before
	t.Logf("flooder wrote %.1f MiB of heartbeats in %v without reading; write ended with %v", float64(written)/(1<<20), took.Round(time.Millisecond), werr)
	t.Logf("server VmRSS: %s before, %s at the end of the flood (%+.1f MiB), peak %s (%+.1f MiB)",
		mib(before), mib(after), float64(rise)/(1<<20), mib(peak), float64(peakRise)/(1<<20))
	switch {
	case werr == nil:
		t.Errorf("%d MiB of heartbeats written without reading a reply, and the server did not close the connection", written>>20)
	case errors.Is(werr, os.ErrDeadlineExceeded):
		t.Errorf("a write moved nothing for %v: the server stopped reading the flooder but did not close it", advSafety)
	}
	const bound = 32 << 20
	if rise >= bound || peakRise >= bound {
		t.Errorf("server RSS rose by %.1f MiB (peak %.1f MiB) during a 64 MiB flood; want under %d MiB", float64(rise)/(1<<20), float64(peakRise)/(1<<20), bound>>20)
	}
	good.check(t, since)
}

// --- (d) random garbage ---

func advGarbage(t *testing.T, addr string, good *goodClient) {
	since := time.Now()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("MONOLOCK_ADVERSARIAL_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("MONOLOCK_ADVERSARIAL_SEED: %v", err)
		}
	}
	t.Logf("garbage seed %d (rerun with MONOLOCK_ADVERSARIAL_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0x6d6f6e6f6c6f636b))
	n := advConnBudget(t, 300)
	payloads := make([][]byte, n)
	for i := range payloads {
		size := 1 + rng.IntN(4096)
		if rng.IntN(4) == 0 {
			size = 1 + rng.IntN(16)
		}
		b := make([]byte, size)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		if rng.IntN(4) == 0 { // garbage from a session that holds a lock
			b = append(protocol.AppendAcquire(nil, advLongLease, fmt.Sprintf("adversarial/garbage-%d", i)), b...)
		}
		payloads[i] = b
	}

	errs := make([]error, n)
	codes := make([]protocol.Code, n)
	var wg sync.WaitGroup
	for i, b := range payloads {
		wg.Go(func() { codes[i], errs[i] = advSendGarbage(addr, b) })
	}
	wg.Wait()
	tally := map[string]int{}
	for i, err := range errs {
		if err != nil {
			t.Errorf("garbage %d (%d bytes, starting %x): %v", i, len(payloads[i]), payloads[i][:min(len(payloads[i]), 16)], err)
			continue
		}
		if codes[i] == 0 {
			tally["EOF"]++
		} else {
			tally["ERROR "+codes[i].Label()]++
		}
	}
	t.Logf("%d garbage connections: %v", n, tally)
	advHealthy(t, addr, "after the garbage")
	good.check(t, since)
}

// advExpect predicts the server's answer to b from the protocol rules: the
// code of the first violation, or 0 when b leaves a frame incomplete (the
// server closes at io-timeout without an ERROR); complete reports that b is
// a valid session ending on a frame boundary; released that b ends the
// session with RELEASE, after which the server closes without an ERROR (with
// a reset when bytes after the RELEASE were left unread).
func advExpect(b []byte) (code protocol.Code, complete, released bool) {
	registered := false
	var f protocol.Frame
	for len(b) > 0 {
		n, err := protocol.DecodeClient(b, &f)
		var pe *protocol.Error
		switch {
		case errors.As(err, &pe):
			return pe.Code, false, false
		case err != nil:
			return protocol.CodeUnknownMessageType, false, false
		case n == 0:
			return 0, false, false
		case (f.Type == protocol.TypeHeartbeat || f.Type == protocol.TypeRelease) && !registered:
			return protocol.CodeFirstMessageNotAcquire, false, false
		case f.Type == protocol.TypeAcquire && registered:
			return protocol.CodeDuplicateAcquire, false, false
		case f.Type == protocol.TypeRelease:
			return 0, false, true
		}
		registered = true
		b = b[n:]
	}
	return 0, true, false
}

// advSendGarbage writes b and reads the answers: WAITING and ACQUIRED for
// the valid frames, then exactly the predicted ERROR (or none), then EOF.
func advSendGarbage(addr string, b []byte) (protocol.Code, error) {
	want, complete, released := advExpect(b)
	conn, err := advDial(addr)
	if err != nil {
		return 0, err
	}
	defer conn.NC.Close()
	deadline := time.Now().Add(advIOTimeout + advSafety)
	_ = conn.NC.SetWriteDeadline(deadline)
	if _, err := conn.NC.Write(b); err != nil && !advClosedByPeer(err) {
		return 0, fmt.Errorf("write: %w", err)
	}
	var got protocol.Code
	for {
		f, err := conn.ReadUntilErr(deadline)
		switch {
		case err == nil && f.Type == protocol.TypeError:
			if got != 0 {
				return got, fmt.Errorf("a second ERROR %s after ERROR %s", f.Code.Label(), got.Label())
			}
			got = f.Code
			if f.Code != want {
				return got, fmt.Errorf("got ERROR %s %q, want %s", f.Code.Label(), f.Reason, advCodeLabel(want))
			}
		case err == nil:
			if got != 0 {
				return got, fmt.Errorf("%s after ERROR %s", f, got.Label())
			}
		case complete && errors.Is(err, os.ErrDeadlineExceeded):
			return 0, nil // a valid session stays open; nothing more to see
		case errors.Is(err, io.EOF) || ((got != 0 || released) && advClosedByPeer(err)):
			if got != want {
				return got, fmt.Errorf("closed after %s, want %s", advCodeLabel(got), advCodeLabel(want))
			}
			return got, nil
		default:
			return got, fmt.Errorf("after %s: %w", advCodeLabel(got), err)
		}
	}
}

func advCodeLabel(c protocol.Code) string {
	if c == 0 {
		return "no ERROR (EOF at io-timeout)"
	}
	return "ERROR " + c.Label()
}

// advClosedByPeer reports a write or read error that only means the server
// has closed the connection (a reset when our bytes reached a closed socket).
func advClosedByPeer(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// --- (e) connect/reset storm ---

func advResetStorm(t *testing.T, addr string, good *goodClient) {
	since := time.Now()
	const cycles, workers, locks = 3000, 16, 5
	acquire := func(i int) []byte {
		return protocol.AppendAcquire(nil, advLongLease, fmt.Sprintf("adversarial/storm-%d", i%locks))
	}
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			for i := w; i < cycles; i += workers {
				if err := advResetCycle(addr, i, acquire(i)); err != nil {
					errs <- fmt.Errorf("cycle %d (kind %d): %w", i, i%4, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d connect/reset cycles (%d workers, %d shared locks) in %v", cycles, workers, locks, time.Since(start).Round(time.Millisecond))
	advHealthy(t, addr, "after the reset storm")
	// No reset session keeps a lock: a new client gets each one, at once or
	// as soon as the server has handled the last resets.
	for i := range locks {
		conn, err := advDial(addr)
		if err != nil {
			t.Fatal(err)
		}
		f, err := conn.RequestErr(acquire(i))
		if err == nil && f.Type == protocol.TypeWaiting {
			f, err = conn.ReadErr(advSafety)
		}
		if err != nil || f.Type != protocol.TypeAcquired {
			t.Errorf("after the storm, storm lock %d answered %s, %v; want ACQUIRED (a reset session still holds it?)", i, f, err)
		}
		_ = conn.NC.Close()
	}
	good.check(t, since)
}

// advResetCycle connects and resets (SO_LINGER 0: close sends RST): at once,
// after half an ACQUIRE, right after a full ACQUIRE, or after its answer.
func advResetCycle(addr string, i int, acquire []byte) error {
	conn, err := advDial(addr)
	if err != nil {
		return err
	}
	defer conn.NC.Close()
	if err := conn.NC.(*net.TCPConn).SetLinger(0); err != nil {
		return err
	}
	_ = conn.NC.SetDeadline(time.Now().Add(advSafety))
	switch i % 4 {
	case 0:
	case 1:
		_, err = conn.NC.Write(acquire[:5])
	case 2:
		_, err = conn.NC.Write(acquire)
	case 3:
		var f wire.Frame
		if f, err = conn.RequestErr(acquire); err == nil && f.Type != protocol.TypeWaiting && f.Type != protocol.TypeAcquired {
			err = fmt.Errorf("ACQUIRE answered %s", f)
		}
	}
	return err
}

// --- (f) giant name length ---

func advGiantNameLength(t *testing.T, addr string, good *goodClient) {
	since := time.Now()
	conn, err := advDial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.NC.Close()
	header := []byte{byte(protocol.TypeAcquire), protocol.Version, 0, 0, 0xea, 0x60, 0xff, 0xff} // lease 60000 ms, name_len 65535
	start := time.Now()
	f, err := conn.RequestErr(header) // and not one name byte
	if err != nil || f.Type != protocol.TypeError || f.Code != protocol.CodeNameTooLong {
		t.Fatalf("65535-byte name length answered %s, %v; want ERROR 0x15 without the name", f, err)
	}
	t.Logf("name_len 65535: ERROR 0x15 %q after %v, no name byte sent", f.Reason, time.Since(start))
	var b [1]byte
	if m, err := conn.NC.Read(b[:]); m != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("after ERROR 0x15: read %d bytes, %v; want EOF", m, err)
	}
	good.check(t, since)
}

// --- helpers ---

func advDial(addr string) (*wire.Conn, error) {
	return wire.Dial(addr, wire.Options{Safety: advSafety})
}

// advHealthy checks that a new client is served at once.
func advHealthy(t *testing.T, addr, when string) {
	t.Helper()
	conn, err := advDial(addr)
	if err != nil {
		t.Fatalf("%s: a new client cannot connect: %v", when, err)
	}
	defer conn.NC.Close()
	name := fmt.Sprintf("adversarial/health-%d", time.Now().UnixNano())
	if f, err := conn.RequestErr(protocol.AppendAcquire(nil, advLongLease, name)); err != nil || f.Type != protocol.TypeAcquired {
		t.Fatalf("%s: a new client's ACQUIRE answered %s, %v; want ACQUIRED", when, f, err)
	}
}

// advDurations summarizes a set of durations for the log.
func advDurations(what string, d []time.Duration) string {
	if len(d) == 0 {
		return what + ": none"
	}
	s := slices.Clone(d)
	slices.Sort(s)
	r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	return fmt.Sprintf("%s: min %v, median %v, p99 %v, max %v", what, r(s[0]), r(s[len(s)/2]), r(s[len(s)*99/100]), r(s[len(s)-1]))
}

// readVmRSS returns a process's resident set size in bytes.
func readVmRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS line")
}

func vmRSS(t *testing.T, pid int) int64 {
	t.Helper()
	rss, err := readVmRSS(pid)
	if err != nil {
		t.Fatalf("read VmRSS of %d: %v", pid, err)
	}
	return rss
}

// advCheckLogs fails on any error-level line the server has logged (the
// lines the process helper kept; at info level there are few).
func advCheckLogs(t *testing.T, p *proc.Process) {
	t.Helper()
	levels := map[string]int{}
	for {
		select {
		case line, ok := <-p.Logs():
			if !ok {
				t.Errorf("the server's log ended: it exited")
				return
			}
			level, _ := line["level"].(string)
			levels[level]++
			if level == "error" || level == "fatal" || level == "panic" {
				t.Errorf("the server logged at %s: %v", level, line)
			}
			continue
		default:
		}
		break
	}
	t.Logf("server log lines by level: %v", levels)
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
