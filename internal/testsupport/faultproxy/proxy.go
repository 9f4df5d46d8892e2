package faultproxy

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// Direction selects traffic by the way it flows.
type Direction uint8

// Directions; Both is ClientToServer|ServerToClient.
const (
	ClientToServer Direction = 1 << iota
	ServerToClient
	Both = ClientToServer | ServerToClient
)

// Proxy forwards every connection accepted on Addr to the target address.
type Proxy struct {
	target string
	ln     net.Listener
	wg     sync.WaitGroup // the accept loop and every connection's goroutines

	mu      sync.Mutex
	frozen  Direction
	delay   time.Duration
	changed chan struct{} // closed and replaced whenever frozen or delay change
	conns   map[*conn]struct{}
	closed  bool
}

// New starts a proxy on 127.0.0.1 at a free port, forwarding to target.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{target: target, ln: ln, changed: make(chan struct{}), conns: make(map[*conn]struct{})}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr returns the proxy's host:port; clients connect here instead of to the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Freeze holds all traffic in dir (existing and new connections) until Thaw.
// Bytes that are being written at the moment of the call may still arrive.
func (p *Proxy) Freeze(dir Direction) { p.update(func() { p.frozen |= dir }) }

// Thaw releases traffic in dir; the held bytes are delivered in order.
func (p *Proxy) Thaw(dir Direction) { p.update(func() { p.frozen &^= dir }) }

// SetDelay delays every chunk of data, in both directions, by d from when the
// proxy read it; 0 removes the delay. A chunk read while an earlier one is still
// being delayed is read only after that one is delivered, so under a stream the
// delay is a lower bound; for request and reply traffic it is exact.
func (p *Proxy) SetDelay(d time.Duration) { p.update(func() { p.delay = d }) }

// update changes the fault settings and wakes every forwarder to re-read them.
func (p *Proxy) update(change func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	change()
	close(p.changed)
	p.changed = make(chan struct{})
}

// CutAll closes every proxied connection at both ends, like a reset; held bytes
// are dropped. New connections are still accepted.
func (p *Proxy) CutAll() {
	p.mu.Lock()
	conns := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
}

// Close stops accepting, cuts every connection and waits for the proxy's
// goroutines to end.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.CutAll()
	p.wg.Wait()
	return err
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue // a failed accept (e.g. a reset before accept) affects only that connection
		}
		p.wg.Add(1)
		go p.serve(client)
	}
}

// serve dials the target for one accepted connection and forwards both ways.
// The connection is tracked from the start, so CutAll and Close also reach one
// whose dial is still under way.
func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	c := &conn{client: client, done: make(chan struct{})}
	if !p.track(c) {
		_ = client.Close()
		return
	}
	defer p.untrack(c)
	server, err := net.Dial("tcp", p.target)
	if err != nil || !c.attach(server) {
		if err == nil {
			_ = server.Close()
		}
		c.close()
		return
	}
	up := make(chan struct{})
	go func() {
		defer close(up)
		p.forward(c, client, server, ClientToServer)
	}()
	p.forward(c, server, client, ServerToClient)
	<-up
}

func (p *Proxy) track(c *conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c *conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

// forwardBuffer is the largest chunk one read moves.
const forwardBuffer = 32 << 10

// forward copies src to dst one chunk at a time, holding each chunk while dir
// is frozen or its delay has not passed. End of stream or an error in either
// direction closes the whole connection: for monolock, a half-closed
// connection is a closed one.
func (p *Proxy) forward(c *conn, src, dst net.Conn, dir Direction) {
	defer c.close()
	buf := make([]byte, forwardBuffer)
	for {
		n, err := src.Read(buf)
		if !p.await(c, dir, time.Now()) {
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// await blocks until data read at arrived may go on in dir: dir not frozen and
// the delay passed. It returns false when the connection was cut meanwhile.
func (p *Proxy) await(c *conn, dir Direction, arrived time.Time) bool {
	for {
		p.mu.Lock()
		frozen, delay, changed := p.frozen&dir != 0, p.delay, p.changed
		p.mu.Unlock()
		var timer *time.Timer
		var due <-chan time.Time // nil while frozen: only a change can wake us
		if !frozen {
			wait := time.Until(arrived.Add(delay))
			if wait <= 0 {
				return true
			}
			timer = time.NewTimer(wait)
			due = timer.C
		}
		select {
		case <-due:
		case <-changed:
		case <-c.done:
			return false
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// conn is one proxied connection.
type conn struct {
	client net.Conn
	done   chan struct{} // closed by close

	mu     sync.Mutex
	server net.Conn // nil until the dial succeeds
	closed bool
}

// attach sets the server side; false when the connection was cut meanwhile.
func (c *conn) attach(server net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.server = server
	return true
}

func (c *conn) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	close(c.done)
	_ = c.client.Close()
	if c.server != nil {
		_ = c.server.Close()
	}
}
