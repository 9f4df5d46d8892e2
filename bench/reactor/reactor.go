// Package reactor is the harness's load generator: one epoll loop on one
// locked OS thread drives thousands of non-blocking client sockets with raw
// system calls, so that a cycle costs the client socket, connect,
// epoll_ctl, write, read and close and nothing more (no goroutine per
// connection, no dup, no channel hand-off). Sockets are registered
// edge-triggered for input, output and peer hang-up; the only output event
// used is the one that reports a completed connect. A Workload's callbacks,
// on the loop's goroutine, decide what each socket sends.
package reactor

import (
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/monolock/monolock/protocol"
)

// conn states.
const (
	stConnecting uint8 = iota + 1
	stOpen
	stClosed
)

// Conn is one client socket of a reactor.
type Conn struct {
	fd     int
	serial int32 // tells a reused descriptor's events from its predecessor's
	state  uint8
	ID     int    // the Workload's index for this connection
	pend   []byte // the start of a frame split across reads

	// Free for the Workload.
	T0      int64 // monotonic ns
	Token   uint64
	Flag    uint8
	HbOut   bool // a heartbeat is in flight
	Granted bool
}

// Workload is what a reactor runs: callbacks on its loop goroutine.
type Workload interface {
	// Connected: the connect completed; usually send the first frame.
	Connected(r *Reactor, c *Conn)
	// Frame: one complete frame from the server; c may be closed inside.
	Frame(r *Reactor, c *Conn, f *protocol.Frame)
	// Lost: the server closed c, or an I/O error did; c is already closed.
	Lost(r *Reactor, c *Conn, err error)
	// Timer: a timer set with after fired for c (still open).
	Timer(r *Reactor, c *Conn, kind uint8)
	// Idle: called once per loop turn after events and timers.
	Idle(r *Reactor)
}

var ErrPeerClosed = errors.New("closed by the server")

// reactor is single-threaded: every method must be called on its loop
// goroutine (or before run starts).
type Reactor struct {
	epfd    int
	sa      unix.SockaddrInet4
	conns   []*Conn // by descriptor
	evs     []unix.EpollEvent
	buf     []byte
	frame   protocol.Frame
	timers  timerHeap
	w       Workload
	serial  int32
	base    time.Time
	nextSrc int

	now   int64 // monotonic ns since base, refreshed every loop turn and on demand
	live  int   // open or connecting sockets
	stop  atomic.Bool
	fatal error

	// counters
	dials, dialErrs, lostConns uint64
}

// New makes a reactor for connections to addr (IPv4) driven by w; its
// clock counts from base.
func New(addr string, w Workload, base time.Time) (*Reactor, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, fmt.Errorf("reactor address %q: %w", addr, err)
	}
	if !ap.Addr().Is4() {
		return nil, fmt.Errorf("reactor address %q: want IPv4", addr)
	}
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	r := &Reactor{
		epfd: epfd,
		sa:   unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()},
		evs:  make([]unix.EpollEvent, 1024),
		buf:  make([]byte, 64<<10),
		w:    w,
		base: base,
	}
	r.Tick()
	return r, nil
}

// Tick refreshes the loop's clock and returns it.
func (r *Reactor) Tick() int64 {
	r.now = int64(time.Since(r.base))
	return r.now
}

// Now is the loop's clock (ns since base) as of the loop turn's start or
// the last Tick.
func (r *Reactor) Now() int64 { return r.now }

// Dial opens a non-blocking connection for Workload index id.
func (r *Reactor) Dial(id int) (*Conn, error) {
	r.dials++
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		r.dialErrs++
		return nil, fmt.Errorf("socket: %w", err)
	}
	// Go's net package sets TCP_NODELAY on every connection; so do we.
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	// Spread connections over many loopback source addresses, as if they
	// came from many client hosts: one source address has ~28k ephemeral
	// ports, each reusable only a second after its TIME_WAIT starts, and at
	// tens of thousands of connections per second connect() would spend its
	// time (and milliseconds of tail latency) searching for a free port. The
	// port is still chosen by connect (IP_BIND_ADDRESS_NO_PORT).
	if r.sa.Addr[0] == 127 {
		_ = unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1)
		r.nextSrc = (r.nextSrc + 1) % sourceAddrs
		src := unix.SockaddrInet4{Addr: [4]byte{127, 0, 1, byte(2 + r.nextSrc)}}
		if err := unix.Bind(fd, &src); err != nil {
			_ = unix.Close(fd)
			r.dialErrs++
			return nil, fmt.Errorf("bind: %w", err)
		}
	}
	err = unix.Connect(fd, &r.sa)
	if err != nil && err != unix.EINPROGRESS {
		_ = unix.Close(fd)
		r.dialErrs++
		return nil, fmt.Errorf("connect: %w", err)
	}
	r.serial++
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLET, Fd: int32(fd), Pad: r.serial}
	if err := unix.EpollCtl(r.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		_ = unix.Close(fd)
		r.dialErrs++
		return nil, fmt.Errorf("epoll_ctl: %w", err)
	}
	for fd >= len(r.conns) {
		r.conns = append(r.conns, make([]*Conn, len(r.conns)+1024)...)
	}
	c := &Conn{fd: fd, serial: r.serial, state: stConnecting, ID: id}
	r.conns[fd] = c
	r.live++
	return c, nil
}

// Send writes one small frame. Frames are a few bytes and at most one
// request is outstanding per connection, so the socket buffer always takes it
// whole; a short write is an error.
func (r *Reactor) Send(c *Conn, b []byte) error {
	if c.state != stOpen {
		return errors.New("send on a connection that is not open")
	}
	n, err := unix.Write(c.fd, b)
	if err == nil && n != len(b) {
		err = fmt.Errorf("short write: %d of %d bytes", n, len(b))
	}
	if err != nil {
		r.Fail(c, err)
		return err
	}
	return nil
}

// Close closes c from the client side.
func (r *Reactor) Close(c *Conn) {
	if c.state == stClosed {
		return
	}
	_ = unix.Close(c.fd)
	r.conns[c.fd] = nil
	c.state = stClosed
	c.pend = nil
	r.live--
}

// Fail closes c and reports it lost.
func (r *Reactor) Fail(c *Conn, err error) {
	if c.state == stClosed {
		return
	}
	r.Close(c)
	r.lostConns++
	r.w.Lost(r, c, err)
}

// After arms a timer of the given kind for c at monotonic time at (ns).
func (r *Reactor) After(at int64, c *Conn, kind uint8) {
	r.timers.push(timerEntry{at: at, c: c, serial: c.serial, kind: kind})
}

// Stop asks the loop to return; safe from any goroutine.
func (r *Reactor) Stop() { r.stop.Store(true) }

// Abort ends the loop with an error (from the loop goroutine).
func (r *Reactor) Abort(err error) {
	if r.fatal == nil {
		r.fatal = err
	}
	r.stop.Store(true)
}

// CloseAll closes every socket and the epoll descriptor.
func (r *Reactor) CloseAll() {
	for _, c := range r.conns {
		if c != nil {
			r.Close(c)
		}
	}
	r.timers = r.timers[:0]
	_ = unix.Close(r.epfd)
}

// sourceAddrs is how many loopback source addresses (127.0.1.2, …) dials
// rotate over.
const sourceAddrs = 64

// maxWait bounds one epoll_wait so that Stop is noticed promptly.
const maxWait = 5 // ms

// Run loops until Stop or abort. It locks its goroutine to a thread and
// unlocks it before returning (a locked goroutine that exits would take its
// thread, and any child started from that thread would get its death signal).
func (r *Reactor) Run() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for !r.stop.Load() {
		wait := maxWait
		if len(r.timers) > 0 {
			d := r.timers[0].at - r.Tick()
			switch {
			case d <= 0:
				wait = 0
			case d < int64(maxWait)*1e6:
				wait = int((d + 999_999) / 1e6)
			}
		}
		n, err := unix.EpollWait(r.epfd, r.evs, wait)
		if err != nil && err != unix.EINTR {
			return fmt.Errorf("epoll_wait: %w", err)
		}
		r.Tick()
		for i := 0; i < n; i++ {
			r.event(&r.evs[i])
		}
		r.fireTimers()
		r.w.Idle(r)
	}
	return r.fatal
}

// maxTimersPerTurn bounds the timers one loop turn fires, so that a burst
// of due heartbeats is interleaved with reading their answers instead of
// delaying them (and inflating the round trips measured).
const maxTimersPerTurn = 64

func (r *Reactor) fireTimers() {
	for fired := 0; fired < maxTimersPerTurn && len(r.timers) > 0 && r.timers[0].at <= r.now; fired++ {
		t := r.timers.pop()
		if t.c.state != stClosed && t.c.serial == t.serial {
			r.w.Timer(r, t.c, t.kind)
		}
	}
}

func (r *Reactor) event(ev *unix.EpollEvent) {
	fd := int(ev.Fd)
	if fd >= len(r.conns) {
		return
	}
	c := r.conns[fd]
	if c == nil || c.serial != ev.Pad {
		return // a descriptor closed earlier in this batch (and maybe reused)
	}
	e := ev.Events
	if c.state == stConnecting {
		if e&(unix.EPOLLERR|unix.EPOLLHUP) != 0 {
			soerr, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
			if err == nil && soerr != 0 {
				err = unix.Errno(soerr)
			}
			if err == nil {
				err = errors.New("connect failed")
			}
			r.Fail(c, fmt.Errorf("connect: %w", err))
			return
		}
		if e&unix.EPOLLOUT == 0 {
			return
		}
		c.state = stOpen
		r.w.Connected(r, c)
		if c.state != stOpen {
			return
		}
	}
	if e&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		r.readAll(c, e&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0)
	}
}

// readAll reads until the socket is drained (edge-triggered), decoding and
// dispatching every complete frame. hup says the peer hung up, so a final
// read must see the end of stream.
func (r *Reactor) readAll(c *Conn, hup bool) {
	serial := c.serial
	for {
		off := copy(r.buf, c.pend)
		c.pend = nil
		n, err := unix.Read(c.fd, r.buf[off:])
		if err == unix.EAGAIN {
			if off > 0 {
				c.pend = append([]byte(nil), r.buf[:off]...)
			}
			return
		}
		if err == unix.EINTR {
			c.pend = append([]byte(nil), r.buf[:off]...)
			continue
		}
		if err != nil {
			r.Fail(c, fmt.Errorf("read: %w", err))
			return
		}
		if n == 0 {
			r.Fail(c, ErrPeerClosed)
			return
		}
		end := off + n
		used := 0
		for used < end {
			k, derr := protocol.DecodeServer(r.buf[used:end], &r.frame)
			if derr != nil {
				r.Fail(c, derr)
				return
			}
			if k == 0 {
				break
			}
			used += k
			r.w.Frame(r, c, &r.frame)
			if c.state == stClosed || c.serial != serial {
				return // the Workload closed it
			}
		}
		if used < end {
			c.pend = append([]byte(nil), r.buf[used:end]...)
		}
		if n < len(r.buf)-off && !hup {
			return // a short read drained the socket
		}
	}
}

// timerEntry is one armed timer.
type timerEntry struct {
	at     int64
	c      *Conn
	serial int32
	kind   uint8
}

// timerHeap is a binary min-heap on at, typed to avoid interface boxing.
type timerHeap []timerEntry

func (h *timerHeap) push(t timerEntry) {
	*h = append(*h, t)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if s[p].at <= s[i].at {
			break
		}
		s[p], s[i] = s[i], s[p]
		i = p
	}
}

func (h *timerHeap) pop() timerEntry {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s[last] = timerEntry{}
	s = s[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= len(s) {
			break
		}
		m := l
		if r := l + 1; r < len(s) && s[r].at < s[l].at {
			m = r
		}
		if s[i].at <= s[m].at {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}

// Base gives a Workload no-op callbacks to embed.
type Base struct{}

func (Base) Connected(*Reactor, *Conn)              {}
func (Base) Frame(*Reactor, *Conn, *protocol.Frame) {}
func (Base) Lost(*Reactor, *Conn, error)            {}
func (Base) Timer(*Reactor, *Conn, uint8)           {}
func (Base) Idle(*Reactor)                          {}
