package scenario

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/monolock/monolock/bench/check"
	"github.com/monolock/monolock/bench/clock"
	"github.com/monolock/monolock/bench/hist"
	"github.com/monolock/monolock/protocol"
)

// goSessions is S6's client: the simple style of an application, a
// goroutine per session on its own net.Conn (plain TCP, or crypto/tls when
// cfg is set), reading through a small bufio.Reader. The sessions are those
// of S3: sessions 0..s/2-1 hold lock i and s/2..s-1 wait on lock i-s/2
// (every holder is granted before the first waiter dials); each heartbeats
// every lease/4 with at most one heartbeat in flight, the first at a random
// point of its first interval, and right after a reply that came later than
// the interval.
type goSessions struct {
	clock clock.Clock // the run's
	addr  string
	cfg   *tls.Config // nil: plain TCP
	sessionPairs
	interval time.Duration

	lastAck []atomic.Int64 // send time of the last acknowledged frame, per session
	stop    chan struct{}
	wg      sync.WaitGroup

	// mu guards what follows, but for the tally's window (atomic).
	mu    sync.Mutex
	conns []net.Conn
	setup hist.Histogram // per session: dial (and handshake) to the first answer
	heartbeatTally
	err     error
	stopped bool
}

// maxInflightGoDials bounds the sessions being set up at once, as
// maxInflightDials does for the reactor.
const maxInflightGoDials = maxInflightDials

func newGoSessions(clk clock.Clock, addr string, cfg *tls.Config, s int, lease time.Duration, chk *check.Checker) *goSessions {
	g := &goSessions{clock: clk, addr: addr, cfg: cfg, sessionPairs: sessionPairs{s: s, lease: lease, chk: chk}, interval: lease / 4,
		lastAck: make([]atomic.Int64, s), stop: make(chan struct{}), conns: make([]net.Conn, s)}
	g.names, g.reqs = acquireRequests("s6", s/2, lease)
	g.closeWindow()
	return g
}

// fail records the first error and stops every session.
func (g *goSessions) fail(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return // errors after Stop are the closes it made
	}
	if g.err == nil {
		g.err = err
	}
	g.stopLocked()
}

func (g *goSessions) stopLocked() {
	if g.stopped {
		return
	}
	g.stopped = true
	close(g.stop)
	for _, c := range g.conns {
		if c != nil {
			_ = c.Close()
		}
	}
}

// Open sets every session up (holders first, then waiters) and returns once
// each has its first answer, or the first error.
func (g *goSessions) Open(deadline time.Time) error {
	sem := make(chan struct{}, maxInflightGoDials)
	ready := make(chan struct{}, g.s)
	open := func(from, to int) error {
		for id := from; id < to; id++ {
			select {
			case sem <- struct{}{}:
			case <-g.stop:
				return g.Err()
			}
			g.wg.Add(1)
			go g.session(id, sem, ready)
		}
		for range to - from {
			select {
			case <-ready:
			case <-g.stop:
				return g.Err()
			case <-time.After(time.Until(deadline)):
				err := errors.New("sessions not all answered within the setup deadline")
				g.fail(err)
				return err
			}
		}
		return nil
	}
	if err := open(0, g.s/2); err != nil {
		return err
	}
	return open(g.s/2, g.s)
}

// Err is the first error seen.
func (g *goSessions) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

// Stop closes every session and waits for their goroutines; it returns the
// first error seen before it.
func (g *goSessions) Stop() error {
	g.mu.Lock()
	g.stopLocked()
	g.mu.Unlock()
	g.wg.Wait()
	return g.Err()
}

// dial opens one connection; with TLS the handshake is part of it.
func (g *goSessions) dial() (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if g.cfg != nil {
		d := tls.Dialer{Config: g.cfg}
		return d.DialContext(ctx, "tcp", g.addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", g.addr)
}

// session is one session's goroutine: set up, then heartbeat until Stop.
func (g *goSessions) session(id int, sem <-chan struct{}, ready chan<- struct{}) {
	defer g.wg.Done()
	t0 := g.clock.Now()
	c, err := g.dial()
	if err != nil {
		<-sem
		g.fail(fmt.Errorf("session %d: dial: %w", id, err))
		return
	}
	g.mu.Lock()
	if g.stopped {
		g.mu.Unlock()
		_ = c.Close()
		<-sem
		return
	}
	g.conns[id] = c
	g.mu.Unlock()
	st := &goSession{id: id, c: c, r: bufio.NewReaderSize(c, 64)}
	if _, err := c.Write(g.reqs[g.lock(id)]); err != nil {
		<-sem
		g.fail(fmt.Errorf("session %d: ACQUIRE: %w", id, err))
		return
	}
	if err := st.read(); err != nil {
		<-sem
		g.fail(fmt.Errorf("session %d: first answer: %w", id, err))
		return
	}
	now := g.clock.Now()
	g.check(st, now, true)
	g.lastAck[id].Store(t0)
	g.mu.Lock()
	g.setup.Record(now - t0)
	g.mu.Unlock()
	<-sem
	ready <- struct{}{}

	rng := rand.New(rand.NewPCG(uint64(id), 6))
	timer := time.NewTimer(time.Duration(rng.Int64N(int64(g.interval)) + 1))
	defer timer.Stop()
	for {
		select {
		case <-g.stop:
			return
		case <-timer.C:
		}
		sent := g.clock.Now()
		if _, err := c.Write(heartbeatFrame); err != nil {
			g.fail(fmt.Errorf("session %d: heartbeat: %w", id, err))
			return
		}
		if err := st.read(); err != nil {
			g.fail(fmt.Errorf("session %d: heartbeat answer: %w", id, err))
			return
		}
		if st.f.Type == protocol.TypeAcquired && !st.granted {
			// A pushed promotion came first: the heartbeat's own answer follows.
			g.check(st, g.clock.Now(), false)
			if err := st.read(); err != nil {
				g.fail(fmt.Errorf("session %d: heartbeat answer: %w", id, err))
				return
			}
		}
		now := g.clock.Now()
		g.check(st, now, false)
		g.lastAck[id].Store(sent)
		next := sent + int64(g.interval)
		late := now >= next
		if inWindow := now >= g.from.Load() && now < g.until.Load(); inWindow || late {
			g.mu.Lock()
			if inWindow {
				g.hbWindow++
				g.hist.Record(now - sent)
			}
			if late {
				g.late++
			}
			g.mu.Unlock()
		}
		if late {
			next = now
		}
		timer.Reset(time.Duration(next - g.clock.Now()))
	}
}

// goSession is one session's connection state, owned by its goroutine.
type goSession struct {
	id      int
	c       net.Conn
	r       *bufio.Reader
	buf     protocol.FrameBuffer
	f       protocol.Frame
	granted bool
	token   uint64
}

// read reads one frame into s.f; an ERROR frame is an error.
func (s *goSession) read() error {
	if err := protocol.ReadServerFrame(s.r, &s.buf, &s.f); err != nil {
		return err
	}
	if s.f.Type == protocol.TypeError {
		return fmt.Errorf("ERROR %#x %q", byte(s.f.Code), s.f.Reason)
	}
	return nil
}

// check judges an answer as S3's checkState does (sessionPairs.judge).
// Once Stop has begun it judges nothing: Stop closes holders, releases the
// checker never hears of, and a waiter may still read the grant that follows.
func (g *goSessions) check(s *goSession, now int64, first bool) {
	select {
	case <-g.stop:
		return
	default:
	}
	if g.judge(s.id, &s.f, now, first, &s.granted, &s.token, func(h int) int64 { return g.lastAck[h].Load() }) {
		g.mu.Lock()
		g.promoted++
		g.mu.Unlock()
	}
}
