package opshttp

import (
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/monolock/monolock/internal/fdgate"
)

// Limits bound an HTTP server of the ops or admin port. Its connections share
// the process's descriptor limit with the lock port, so neither a slow nor an
// idle client may keep one for long, nor may there be many.
type Limits struct {
	ReadHeaderTimeout time.Duration // until the request's headers are in
	ReadTimeout       time.Duration // until the whole request is in
	WriteTimeout      time.Duration // from the end of the headers to the end of the answer
	IdleTimeout       time.Duration // a keep-alive connection between requests
	MaxConns          int           // connections open at once; more wait in the kernel's backlog
}

// DefaultLimits are the limits of an HTTP server in a process allowed nofile
// descriptors. A request header has 2 s: probes and scrapers send theirs in
// one segment, so only a client trickling it runs out. WriteTimeout exceeds
// the admin API's 10 s wait for the event loop; IdleTimeout outlasts a 15 s
// scrape interval, so scrapers keep their connection.
func DefaultLimits(nofile uint64) Limits {
	return Limits{
		ReadHeaderTimeout: 2 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       30 * time.Second,
		MaxConns:          MaxConns(nofile),
	}
}

// MaxConns is the connection cap of one HTTP listener: 64, or a sixteenth of
// the descriptor limit when that is less, so that the ops and admin ports
// together hold at most an eighth of the descriptors. Probes and scrapes need
// a few; the lock port needs the rest.
func MaxConns(nofile uint64) int {
	return int(max(1, min(64, nofile/16)))
}

// NewServer returns an HTTP server for h within lim. Its own error lines
// (accept errors, bad requests) go to log: error level, warn for TLS
// handshake failures, which a client causes. Over TLS (served on a
// tls.NewListener) net/http bounds each handshake by the least of lim's
// read and write timeouts, ReadHeaderTimeout by default, so a client that
// stalls its handshake holds its connection no longer than one that stalls
// its request header.
func NewServer(h http.Handler, lim Limits, log zerolog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: lim.ReadHeaderTimeout,
		ReadTimeout:       lim.ReadTimeout,
		WriteTimeout:      lim.WriteTimeout,
		IdleTimeout:       lim.IdleTimeout,
		ErrorLog:          ErrorLog(log),
	}
}

// ErrorLog returns a standard logger that forwards each line to log, so that
// net/http's messages follow -log-format like every other diagnostic. TLS
// handshake failures, which any client can cause in a loop, are sampled.
func ErrorLog(l zerolog.Logger) *log.Logger {
	return log.New(errorWriter{log: l, handshakes: l.Sample(&zerolog.BurstSampler{Burst: handshakeErrorsPerSecond, Period: time.Second})}, "", 0)
}

// handshakeErrorsPerSecond bounds the log lines of failed TLS handshakes.
const handshakeErrorsPerSecond = 10

type errorWriter struct{ log, handshakes zerolog.Logger }

func (w errorWriter) Write(p []byte) (int, error) {
	msg := strings.TrimRight(string(p), "\n")
	ev := w.log.Error()
	if strings.Contains(msg, "TLS handshake error") {
		ev = w.handshakes.Warn()
	}
	ev.Msg(msg)
	return len(p), nil
}

// LimitListener serves at most n connections at once for hs. It accepts one
// more and holds it until there is room, so a burst waits in the kernel's
// backlog and takes no descriptor of the process. A connection held back
// makes room by closing, of the connections that have sent part of a
// request's header but not all of it, or are idle between requests, the
// one that has been so the longest (see evict): neither slow clients nor
// idle ones can lock a probe out, however many there are, since the probe
// sends its header at once and is never among them. Only requests whose header
// is in, each bounded by hs's timeouts, make a new connection wait.
// At the process's descriptor limit it accepts with a spare descriptor it
// keeps for that (see spare.go), so probes are answered then too.
// Without a spare it asks the lock port for a descriptor through gate, if
// not nil (see package fdgate).
// LimitListener sets hs.ConnState to learn each connection's state.
func LimitListener(hs *http.Server, ln net.Listener, n int, gate *fdgate.Gate) net.Listener {
	l := &limitListener{
		Listener: ln, slots: make(chan struct{}, n), done: make(chan struct{}),
		waiting: map[net.Conn]uint64{}, evictable: make(chan struct{}, 1),
		spare: newSpare(ln), gate: gate, pending: func() bool { return queued(ln) },
	}
	prev := hs.ConnState
	hs.ConnState = func(c net.Conn, st http.ConnState) {
		l.track(c, st)
		if prev != nil {
			prev(c, st)
		}
	}
	return l
}

type limitListener struct {
	net.Listener
	slots     chan struct{} // one element per connection served
	done      chan struct{} // closed by Close
	closeOnce sync.Once
	spare     *spareDescriptor // for an accept at the descriptor limit (see spare.go)
	gate      *fdgate.Gate     // asks the lock port for a descriptor without a spare; may be nil
	pending   func() bool      // a connection waits in the listener's queue

	mu        sync.Mutex
	waiting   map[net.Conn]uint64 // connections without a request header yet, and since when (a sequence number)
	seq       uint64
	evictable chan struct{} // cap 1: a connection joined waiting
}

// silentGrace is how long a connection held back waits, when every
// connection without a header has sent nothing yet, for some to send
// something (a burst of arrivals gets ahead of their clients' requests and
// of the server's goroutines) before it closes the oldest of them.
const silentGrace = 100 * time.Millisecond

func (l *limitListener) Accept() (net.Conn, error) {
	c, err := l.accept()
	if err != nil {
		return nil, err
	}
	var grace *time.Timer
	defer func() {
		if grace != nil {
			grace.Stop()
		}
	}()
	silent := false // may close a connection that has sent nothing
	for {
		select {
		case l.slots <- struct{}{}:
			return l.wrap(c), nil
		default:
		}
		var graceUp <-chan time.Time
		if !l.evict(silent) && !silent {
			if grace == nil {
				grace = time.NewTimer(silentGrace)
			}
			graceUp = grace.C
		}
		select {
		case l.slots <- struct{}{}:
			return l.wrap(c), nil
		case <-l.evictable:
		case <-graceUp:
			silent = true
		case <-l.done:
			_ = c.Close()
			return nil, net.ErrClosed
		}
	}
}

func (l *limitListener) wrap(c net.Conn) *limitConn {
	return &limitConn{Conn: c, l: l, release: func() {
		<-l.slots
		l.spare.reserve() // the descriptor the connection just freed, if the spare was used
	}}
}

// signal wakes an Accept waiting for a connection to close.
func (l *limitListener) signal() {
	select {
	case l.evictable <- struct{}{}:
	default:
	}
}

// track follows a connection through net/http's states. New and Idle
// connections are reading a request's header (net/http marks one Active
// only once the header is in).
func (l *limitListener) track(c net.Conn, st http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st != http.StateNew && st != http.StateIdle {
		delete(l.waiting, c)
		return
	}
	l.seq++
	l.waiting[c] = l.seq
	l.signal()
}

// evict closes the connection that has waited for a request header the
// longest and reports whether there was one; its Close frees its slot.
// Connections that have sent something are preferred: a slow client that
// trickles its header, or an idle keep-alive one. One that has sent nothing
// may be a probe whose request is still on its way; it is closed only when
// silent is set and no other waits. One whose bytes wait unread in the
// kernel is never taken for silent: the client has spoken, and it is the
// server, on a loaded machine, that has not yet read it (a probe whose
// request waits for its goroutine).
func (l *limitListener) evict(silent bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	var (
		oldest      net.Conn
		since       uint64
		oldestHeard bool
	)
	for c, seq := range l.waiting {
		heard := true
		if lc, ok := underLimit(c); ok {
			heard = lc.heard.Load()
			if !heard && silent && unread(lc.Conn) {
				continue
			}
		}
		if oldest == nil || (heard && !oldestHeard) || (heard == oldestHeard && seq < since) {
			oldest, since, oldestHeard = c, seq, heard
		}
	}
	if oldest == nil || (!oldestHeard && !silent) {
		return false
	}
	delete(l.waiting, oldest)
	_ = oldest.Close() // under mu, so that track sees it no more
	return true
}

// underLimit is the limitConn under c: c itself, or the connection a TLS
// listener wrapped around it (net/http tracks the *tls.Conn).
func underLimit(c net.Conn) (*limitConn, bool) {
	if tc, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = tc.NetConn()
	}
	lc, ok := c.(*limitConn)
	return lc, ok
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	l.spare.close()
	return l.Listener.Close()
}

type limitConn struct {
	net.Conn
	l       *limitListener
	once    sync.Once
	release func()
	heard   atomic.Bool // the server has read bytes from it
}

func (c *limitConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 && !c.heard.Load() {
		c.heard.Store(true)
		c.l.signal() // an Accept may be waiting for a connection it may close
	}
	return n, err
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
