package client

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/monolock/monolock/internal/testsupport/wire"
)

// scriptDialer refuses the addresses in refuse and connects to any other
// with one end of a pipe; it records every address it was asked for.
type scriptDialer struct {
	mu     sync.Mutex
	refuse map[string]bool
	dialed []string
}

func (d *scriptDialer) DialContext(_ context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dialed = append(d.dialed, addr)
	if d.refuse[addr] {
		return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
	}
	client, server := net.Pipe()
	_ = server.Close()
	return client, nil
}

// attempt dials once and returns the addresses asked for, in order, and
// the connection's error.
func (d *scriptDialer) attempt(t *testing.T, c *Client) ([]string, error) {
	t.Helper()
	d.mu.Lock()
	d.dialed = nil
	d.mu.Unlock()
	conn, err := c.dial(context.Background())
	if conn != nil {
		_ = conn.Close()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.dialed), err
}

// TestDialStartsFromTheAddressThatWorked: a refused address is passed over
// for the next one within the attempt; the next attempt starts from the
// address that last worked, then tries the others in their order. Names and
// literal IP addresses (parsed once, when the Client is made) alike.
func TestDialStartsFromTheAddressThatWorked(t *testing.T) {
	for _, addrs := range map[string][3]string{
		"names":    {"a:1", "b:1", "c:1"},
		"literals": {"192.0.2.1:1", "192.0.2.2:1", "[2001:db8::3]:1"},
	} {
		a, b, c := addrs[0], addrs[1], addrs[2]
		d := &scriptDialer{refuse: map[string]bool{a: true}}
		client := New(Config{Address: a, Addrs: []string{b, c, a}, Dialer: d})
		for _, step := range []struct {
			refuse []string
			want   []string
		}{
			{[]string{a}, []string{a, b}},       // a refuses, b works
			{[]string{a}, []string{b}},          // b first now
			{[]string{a, b}, []string{b, a, c}}, // b went away: the others in order
			{nil, []string{c}},                  // c worked last
		} {
			d.refuse = map[string]bool{}
			for _, r := range step.refuse {
				d.refuse[r] = true
			}
			got, err := d.attempt(t, client)
			if err != nil || !slices.Equal(got, step.want) {
				t.Fatalf("refusing %v: dialed %v (%v), want %v and a connection", step.refuse, got, err, step.want)
			}
		}
	}
}

// TestDialKeepsTheDialersLocalAddress: a literal address skips the
// resolver, but a *net.Dialer's LocalAddr still binds the connection.
func TestDialKeepsTheDialersLocalAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}
	c := New(Config{Address: ln.Addr().String(), Dialer: &net.Dialer{LocalAddr: local}})
	conn, err := c.dial(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	if got := conn.LocalAddr().(*net.TCPAddr).IP; !got.Equal(local.IP) {
		t.Fatalf("the connection is from %v, want the Dialer's LocalAddr %v", got, local.IP)
	}
}

// TestDialEveryAddressRefused: the error names every address and each
// refusal, is retried by DoRetry, and matches the refusal.
func TestDialEveryAddressRefused(t *testing.T) {
	d := &scriptDialer{refuse: map[string]bool{"a:1": true, "b:1": true}}
	c := New(Config{Addrs: []string{"a:1", "b:1"}, Dialer: d})
	got, err := d.attempt(t, c)
	if !slices.Equal(got, []string{"a:1", "b:1"}) {
		t.Fatalf("dialed %v, want both addresses in order", got)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) || !transient(err) {
		t.Fatalf("err = %v (transient %v): want the refusal, retried", err, transient(err))
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "monolock: dial a:1, b:1: ") || strings.Count(msg, "refused") != 2 {
		t.Errorf("%q: want both addresses, then each refusal", msg)
	}
}

// TestDialNameWithSeveralAddresses: a host name that resolves to several
// addresses is one candidate each, and the one that worked goes first; a
// name with one address is left to the dialer.
func TestDialNameWithSeveralAddresses(t *testing.T) {
	d := &scriptDialer{refuse: map[string]bool{"192.0.2.1:7070": true}}
	c := New(Config{Addrs: []string{"locks.test:7070", "single.test:7070"}, Dialer: d})
	c.resolve = func(_ context.Context, host string) ([]string, error) {
		switch host {
		case "locks.test":
			return []string{"192.0.2.1", "192.0.2.2"}, nil
		case "single.test":
			return []string{"192.0.2.9"}, nil
		}
		return nil, errors.New("no such host")
	}
	if got, err := d.attempt(t, c); err != nil || !slices.Equal(got, []string{"192.0.2.1:7070", "192.0.2.2:7070"}) {
		t.Fatalf("dialed %v (%v), want the name's two addresses in turn", got, err)
	}
	d.refuse = map[string]bool{"192.0.2.1:7070": true, "192.0.2.2:7070": true}
	if got, _ := d.attempt(t, c); !slices.Equal(got, []string{"192.0.2.2:7070", "192.0.2.1:7070", "single.test:7070"}) {
		t.Fatalf("dialed %v, want the address that worked first, then the others, the single-address name as given", got)
	}
}

// TestSeveralAddressesRealSockets: a closed port first, a real server
// second: the lock is granted by the server within the connect timeout,
// and the next attempt dials the server first.
func TestSeveralAddressesRealSockets(t *testing.T) {
	closed, server := wire.ClosedAddr(t), startServer(t)
	d := &countingDialer{}
	c := New(Config{Addrs: []string{closed, server}, Dialer: d, ConnectTimeout: patience})
	l, err := c.Acquire(testContext(t), "failover", 10*time.Second)
	if err != nil {
		t.Fatalf("Acquire with %s refused and %s up: %v", closed, server, err)
	}
	if n := d.n.Load(); n != 2 {
		t.Errorf("%d dials, want 2: the refused address, then the server", n)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if l, err = c.TryAcquire(testContext(t), "failover", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if n := d.n.Load(); n != 3 {
		t.Errorf("%d dials in all, want 3: the second attempt starts from the server", n)
	}
}
