package conformance

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/monolock/monolock/protocol"
)

// FakeServer is the kit's scripted server: a listener on 127.0.0.1 port 0
// whose connections the scenario answers by hand.
type FakeServer struct {
	ln    net.Listener
	conns chan *ServerConn

	mu        sync.Mutex
	all       []*ServerConn
	onRelease ReleaseAnswer // for connections accepted from now on
}

// ReleaseAnswer is what the fake server does when a client sends RELEASE.
type ReleaseAnswer uint8

const (
	// CloseFirst is the server's answer: nothing, and its FIN first (a
	// half-close, so that the kit still sees how the client ends).
	CloseFirst ReleaseAnswer = iota
	// OldServer is a server from before RELEASE: ERROR 0x13, then its FIN.
	OldServer
	// NeverClose reads on and never closes: the client must give up.
	NeverClose
)

// OnRelease sets the answer to RELEASE for the connections accepted after
// it (CloseFirst until then).
func (s *FakeServer) OnRelease(a ReleaseAnswer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onRelease = a
}

// Listen starts a fake server; with cfg it speaks TLS (the handshake runs
// on the connection's first read, so a refused handshake ends the stream
// with its error: see ServerConn.WaitEnd).
func Listen(cfg *tls.Config) (*FakeServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	if cfg != nil {
		ln = tls.NewListener(ln, cfg)
	}
	s := &FakeServer{ln: ln, conns: make(chan *ServerConn, 64)}
	go s.accept()
	return s, nil
}

// Addr is the address a driver connects to.
func (s *FakeServer) Addr() string { return s.ln.Addr().String() }

func (s *FakeServer) accept() {
	defer close(s.conns)
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true) // TLS connections have it from the listener's TCP conns
		}
		s.mu.Lock()
		c := newServerConn(nc, s.onRelease)
		s.all = append(s.all, c)
		s.mu.Unlock()
		s.conns <- c
	}
}

// Accepted is how many connections the server has accepted.
func (s *FakeServer) Accepted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.all)
}

// Next returns the next accepted connection.
func (s *FakeServer) Next(timeout time.Duration) (*ServerConn, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case c, ok := <-s.conns:
		if !ok {
			return nil, errors.New("the kit's listener closed")
		}
		return c, nil
	case <-t.C:
		return nil, fmt.Errorf("the client did not connect within %v", timeout)
	}
}

// Close stops listening and closes every connection.
func (s *FakeServer) Close() {
	_ = s.ln.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.all {
		_ = c.nc.Close()
	}
}

// Request is one frame the client sent.
type Req struct {
	Heartbeat bool      // false: ACQUIRE
	Bytes     []byte    // the whole frame
	At        time.Time // when its first byte was read: the kit's "send" time
	Index     int       // 0 for the ACQUIRE, then 1, 2, … for heartbeats
}

// ServerConn is one client connection to the fake server. Its reader checks
// the wire invariants of docs/conformance.md as the bytes arrive.
type ServerConn struct {
	nc        net.Conn
	reqs      chan Req // every request, closed at end of stream
	wmu       sync.Mutex
	onRelease ReleaseAnswer

	mu          sync.Mutex
	log         []Req
	outstanding int // requests not answered yet
	violations  []string
	endAt       time.Time
	endErr      error // nil for an orderly end of stream (FIN)
	ended       chan struct{}
	releasedAt  time.Time // when RELEASE was read; zero if never
	kitClosedAt time.Time // when the kit sent its FIN after RELEASE
}

func newServerConn(nc net.Conn, onRelease ReleaseAnswer) *ServerConn {
	c := &ServerConn{nc: nc, reqs: make(chan Req, 4096), ended: make(chan struct{}), onRelease: onRelease}
	go c.read()
	return c
}

func (c *ServerConn) violate(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.violations = append(c.violations, fmt.Sprintf(format, args...))
}

func (c *ServerConn) read() {
	r := bufio.NewReader(c.nc)
	defer close(c.reqs)
	for i := 0; ; i++ {
		first, err := r.ReadByte()
		at := time.Now()
		if err != nil {
			c.finish(err)
			return
		}
		req := Req{At: at, Index: i, Bytes: []byte{first}}
		switch protocol.Type(first) {
		case protocol.TypeAcquire:
			if i != 0 {
				c.violate("rule: ACQUIRE only as the first frame; request %d was a second ACQUIRE", i)
			}
			hdr := make([]byte, protocol.AcquireHeaderLen-1)
			if _, err := io.ReadFull(r, hdr); err != nil {
				c.violate("frames: ACQUIRE cut short after %d bytes: %v", 1+len(hdr), err)
				c.finish(err)
				return
			}
			name := make([]byte, binary.BigEndian.Uint16(hdr[5:7]))
			if _, err := io.ReadFull(r, name); err != nil {
				c.violate("frames: ACQUIRE name cut short: %v", err)
				c.finish(err)
				return
			}
			req.Bytes = append(append(req.Bytes, hdr...), name...)
		case protocol.TypeHeartbeat:
			req.Heartbeat = true
			if i == 0 {
				c.violate("rule: the first frame must be ACQUIRE; the client sent HEARTBEAT first")
			}
		case protocol.TypeRelease:
			if i == 0 {
				c.violate("rule: the first frame must be ACQUIRE; the client sent RELEASE first")
			}
			c.released(r)
			return
		default:
			c.violate("frames: the client sent byte 0x%02x, which is none of ACQUIRE (0x01), HEARTBEAT (0x02), RELEASE (0x03)", first)
			c.finish(nil)
			return
		}
		c.mu.Lock()
		if c.outstanding > 0 {
			c.violations = append(c.violations, fmt.Sprintf(
				"rule 3 (at most one request in flight): request %d was sent while %d earlier request(s) had no answer", i, c.outstanding))
		}
		c.outstanding++
		c.log = append(c.log, req)
		c.mu.Unlock()
		c.reqs <- req
	}
}

// released answers RELEASE as the connection's ReleaseAnswer says, then
// reads on to the client's end of stream: nothing may follow RELEASE.
func (c *ServerConn) released(r *bufio.Reader) {
	c.mu.Lock()
	c.releasedAt = time.Now()
	c.mu.Unlock()
	switch c.onRelease {
	case CloseFirst:
		c.closeWrite()
	case OldServer:
		_ = c.Write(protocol.AppendError(nil, protocol.CodeUnknownMessageType, "unknown message type: 0x03; a client sends only ACQUIRE (0x01) and HEARTBEAT (0x02)"))
		c.closeWrite()
	}
	extra := 0
	for {
		if _, err := r.ReadByte(); err != nil {
			if extra > 0 {
				c.violate("release: the client sent %d byte(s) after RELEASE, which ends the session", extra)
			}
			c.finish(err)
			// The client has ended its side: end the connection, so that a
			// client that closed first reaches its TIME_WAIT, where the kit
			// sees it.
			_ = c.nc.Close()
			return
		}
		extra++
	}
}

// closeWrite sends the kit's FIN (after close_notify over TLS) and keeps
// reading: the server closes first.
func (c *ServerConn) closeWrite() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	raw := c.nc
	if tc, ok := raw.(*tls.Conn); ok {
		_ = tc.CloseWrite() // close_notify
		raw = tc.NetConn()
	}
	if cw, ok := raw.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	c.mu.Lock()
	c.kitClosedAt = time.Now()
	c.mu.Unlock()
}

// Released reports when RELEASE was read, and when the kit closed after it
// (zero if it did not).
func (c *ServerConn) Released() (at, kitClosed time.Time, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.releasedAt, c.kitClosedAt, !c.releasedAt.IsZero()
}

// Ports are the client's port and the kit's, for the kernel's socket table.
func (c *ServerConn) Ports() (client, kit int) {
	if a, ok := c.nc.RemoteAddr().(*net.TCPAddr); ok {
		client = a.Port
	}
	if a, ok := c.nc.LocalAddr().(*net.TCPAddr); ok {
		kit = a.Port
	}
	return client, kit
}

func (c *ServerConn) finish(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.endAt = time.Now()
	if !errors.Is(err, io.EOF) {
		c.endErr = err
	}
	close(c.ended)
}

// NextReq returns the client's next request.
func (c *ServerConn) NextReq(timeout time.Duration) (Req, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case r, ok := <-c.reqs:
		if !ok {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.endErr != nil { // a reset, or a TLS handshake that failed
				return Req{}, fmt.Errorf("the connection ended (%v) instead of the client sending a request", c.endErr)
			}
			return Req{}, fmt.Errorf("the client closed the connection instead of sending a request")
		}
		return r, nil
	case <-t.C:
		return Req{}, fmt.Errorf("the client sent no request within %v", timeout)
	}
}

// Reply writes an answer to the oldest unanswered request.
func (c *ServerConn) Reply(frame []byte) error {
	// Counted before the bytes leave, so the client's next request cannot be
	// read before its predecessor counts as answered.
	c.mu.Lock()
	if c.outstanding > 0 {
		c.outstanding--
	}
	c.mu.Unlock()
	return c.Write(frame)
}

// Write writes bytes that answer nothing (a push, an ERROR, garbage).
func (c *ServerConn) Write(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.nc.Write(b)
	return err
}

// WriteSplit writes b in pieces of the given sizes, pause apart.
func (c *ServerConn) WriteSplit(b []byte, pause time.Duration, sizes ...int) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	for len(b) > 0 {
		n := 1
		if len(sizes) > 0 {
			n, sizes = min(sizes[0], len(b)), sizes[1:]
		}
		if _, err := c.nc.Write(b[:n]); err != nil {
			return err
		}
		b = b[n:]
		if len(b) > 0 {
			time.Sleep(pause)
		}
	}
	return nil
}

// ReplySplit is Reply written in pieces (one byte each when sizes is empty).
func (c *ServerConn) ReplySplit(frame []byte, pause time.Duration, sizes ...int) error {
	c.mu.Lock()
	if c.outstanding > 0 {
		c.outstanding--
	}
	c.mu.Unlock()
	return c.WriteSplit(frame, pause, sizes...)
}

// Close closes the connection (the kit's FIN).
func (c *ServerConn) Close() { _ = c.nc.Close() }

// Ended is closed when the client's side of the stream has ended.
func (c *ServerConn) Ended() <-chan struct{} { return c.ended }

// WaitEnd waits for the end of the client's stream and returns when it came
// and how: nil for an orderly FIN, the read error (a reset) otherwise. err
// says the stream did not end within timeout.
func (c *ServerConn) WaitEnd(timeout time.Duration) (at time.Time, how error, err error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-c.ended:
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.endAt, c.endErr, nil
	case <-t.C:
		return time.Time{}, nil, fmt.Errorf("the client did not close the connection within %v", timeout)
	}
}

// Log is every request so far.
func (c *ServerConn) Log() []Req {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Req(nil), c.log...)
}

// Violations are the wire invariants the client broke on this connection.
func (c *ServerConn) Violations() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.violations...)
}

// Responder answers requests on its own until stopped: answer(req) returns the
// frame and the delay before it, or nil to leave the request unanswered.
type Responder struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	sent []time.Time // when each answer was written, by request index
}

// Respond starts answering c's requests; with pause > 0 every answer is
// written one byte at a time, pause apart.
func (c *ServerConn) Respond(answer func(Req) (frame []byte, delay time.Duration), pause time.Duration) *Responder {
	r := &Responder{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for {
			select {
			case <-r.stop:
				return
			case req, ok := <-c.reqs:
				if !ok {
					return
				}
				frame, delay := answer(req)
				if frame == nil {
					continue
				}
				if delay > 0 {
					select {
					case <-time.After(delay):
					case <-r.stop:
						return
					}
				}
				// Taken before the write: the client may answer, and the reader
				// see its next request, before Write returns here.
				r.mu.Lock()
				for len(r.sent) <= req.Index {
					r.sent = append(r.sent, time.Time{})
				}
				r.sent[req.Index] = time.Now()
				r.mu.Unlock()
				var err error
				if pause > 0 {
					err = c.ReplySplit(frame, pause)
				} else {
					err = c.Reply(frame)
				}
				if err != nil {
					return
				}
			}
		}
	}()
	return r
}

// Stop stops answering and waits until the responder has stopped.
func (r *Responder) Stop() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	<-r.done
}

// AnsweredAt is when the answer to request i was written, taken just before
// the write (zero if never).
func (r *Responder) AnsweredAt(i int) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i < len(r.sent) {
		return r.sent[i]
	}
	return time.Time{}
}
