package client

import (
	"context"
	"crypto/tls"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// DefaultAddress is the server address used when Config.Address is empty.
const DefaultAddress = "127.0.0.1:7070"

// Dialer opens the connections. *net.Dialer and *tls.Dialer (TLS, mutual TLS)
// both satisfy it.
type Dialer interface {
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
}

// Config configures a Client.
type Config struct {
	// Address is the server's host:port; DefaultAddress when empty and
	// Addrs is empty too.
	Address string
	// Addrs lists more servers' host:port addresses, tried after Address:
	// a primary and its standbys, of which only the primary accepts
	// connections. Each attempt starts from the address that last worked
	// and, when the connect to it fails (refused, unreachable), tries the
	// others in turn within the same connect timeout. A host name that
	// resolves to several addresses (in Address or Addrs) is one candidate
	// per address; over TLS each is verified under the name. Duplicates
	// are dropped.
	Addrs []string
	// Dialer opens connections; when nil, a *net.Dialer with TCP keep-alive
	// off (the session's heartbeats are its failure detector, so keep-alive
	// probes would only cost four more system calls per connect). Use a *tls.Dialer for
	// TLS. A *tls.Dialer whose Config has no ClientSessionCache (and does not
	// disable session tickets) is used with a copy of that Config that has
	// one, shared by every connection of this Client: a reconnect after a
	// restart or a failover resumes the TLS session (no signature on either
	// side) when the server keeps its session-ticket keys (monolock
	// -tls-ticket-keys).
	Dialer Dialer
	// ConnectTimeout bounds each connection's TCP connect and TLS handshake,
	// whatever ctx allows: a peer that accepts and then stalls mid-handshake
	// fails the dial after it (DoRetry retries that). Zero or negative means
	// DefaultConnectTimeout. A shorter ctx deadline still wins.
	ConnectTimeout time.Duration
}

// Client acquires locks from one monolock server. It holds no connection of its
// own (every lock is its own connection), so it is safe for concurrent use and
// needs no closing.
type Client struct {
	addresses []string // Address, then Addrs; at least one
	// literal are the candidates when every address is a literal IP:port,
	// parsed once here instead of on every attempt; nil otherwise.
	literal        []candidate
	dialer         Dialer
	connectTimeout time.Duration
	// lastGood is the candidate address whose connect last succeeded: the
	// next attempt tries it first.
	lastGood atomic.Pointer[string]
	// resolve looks up a host name's addresses; nil: net.DefaultResolver.
	// Tests set it.
	resolve func(ctx context.Context, host string) ([]string, error)

	// observe, when set by tests, sees every acknowledged ACQUIRE or HEARTBEAT.
	// It runs on the session goroutine and must not block.
	observe func(ackEvent)
}

// New returns a Client for cfg.
func New(cfg Config) *Client {
	c := &Client{dialer: cfg.Dialer, connectTimeout: connectTimeout(cfg.ConnectTimeout)}
	for _, a := range append([]string{cfg.Address}, cfg.Addrs...) {
		if a != "" && !slices.Contains(c.addresses, a) {
			c.addresses = append(c.addresses, a)
		}
	}
	if len(c.addresses) == 0 {
		c.addresses = []string{DefaultAddress}
	}
	if c.dialer == nil {
		c.dialer = &net.Dialer{KeepAlive: -1}
	}
	c.dialer = withSessionCache(c.dialer)
	c.literal = literalCandidates(c.addresses)
	return c
}

// literalCandidates are the candidates for addresses that are all literal
// IP:port addresses (no name to resolve), nil when one is not.
func literalCandidates(addresses []string) []candidate {
	out := make([]candidate, 0, len(addresses))
	for _, a := range addresses {
		ap, err := netip.ParseAddrPort(a)
		if err != nil || ap.Addr().Is4In6() {
			return nil
		}
		out = append(out, candidate{addr: a, ip: ap})
	}
	return out
}

// withSessionCache gives a *tls.Dialer a client session cache if its
// configuration has none, without changing the caller's dialer.
func withSessionCache(d Dialer) Dialer {
	td, ok := d.(*tls.Dialer)
	if !ok || td.Config == nil || td.Config.ClientSessionCache != nil || td.Config.SessionTicketsDisabled {
		return d
	}
	cfg := td.Config.Clone()
	cfg.ClientSessionCache = tls.NewLRUClientSessionCache(0)
	return &tls.Dialer{NetDialer: td.NetDialer, Config: cfg}
}

// target names the configured addresses, for messages.
func (c *Client) target() string { return strings.Join(c.addresses, ", ") }

// candidate is one address to dial; name is the host name it was resolved
// from (for TLS verification), empty when it was given as such; ip is addr
// parsed when it was configured as a literal IP:port, else the zero value.
type candidate struct {
	addr, name string
	ip         netip.AddrPort
}

// candidates are the addresses to dial, in order: each configured address,
// a host name resolving to several addresses giving one candidate each (one
// resolving to a single address, or not at all, is left to the dialer), and
// the one that last worked moved first. The result is only read: with a
// single literal address it is the Client's own.
func (c *Client) candidates(ctx context.Context) []candidate {
	if len(c.literal) == 1 {
		return c.literal
	}
	if c.literal != nil {
		return lastGoodFirst(slices.Clone(c.literal), c.lastGood.Load())
	}
	resolve := c.resolve
	if resolve == nil {
		resolve = net.DefaultResolver.LookupHost
	}
	var out []candidate
	add := func(cand candidate) {
		if !slices.ContainsFunc(out, func(o candidate) bool { return o.addr == cand.addr }) {
			out = append(out, cand)
		}
	}
	addresses := c.addresses
	if len(addresses) == 0 {
		addresses = []string{""} // a Client not made by New: the dialer has the last word
	}
	for _, a := range addresses {
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" || net.ParseIP(host) != nil {
			add(candidate{addr: a})
			continue
		}
		ips, err := resolve(ctx, host)
		if err != nil || len(ips) < 2 {
			add(candidate{addr: a})
			continue
		}
		for _, ip := range ips {
			add(candidate{addr: net.JoinHostPort(ip, port), name: host})
		}
	}
	return lastGoodFirst(out, c.lastGood.Load())
}

// lastGoodFirst moves the candidate whose address is *last (when last is
// set) to the front, keeping the others' order.
func lastGoodFirst(out []candidate, last *string) []candidate {
	if last != nil {
		if i := slices.IndexFunc(out, func(o candidate) bool { return o.addr == *last }); i > 0 {
			first := out[i]
			copy(out[1:i+1], out[:i])
			out[0] = first
		}
	}
	return out
}

// dialOne dials one candidate. A resolved address is verified under TLS as
// the name it was resolved from, unless the Dialer's configuration names
// the server itself.
func (c *Client) dialOne(ctx context.Context, cand *candidate) (net.Conn, error) {
	d := c.dialer
	if nd, ok := d.(*net.Dialer); ok && cand.ip.IsValid() && nd.LocalAddr == nil {
		// The address needs no resolving: skip the resolver's work.
		conn, err := nd.DialTCP(ctx, "tcp", netip.AddrPort{}, cand.ip)
		if err != nil {
			return nil, err
		}
		return conn, nil
	}
	if td, ok := d.(*tls.Dialer); ok && cand.name != "" && (td.Config == nil || td.Config.ServerName == "") {
		cfg := &tls.Config{}
		if td.Config != nil {
			cfg = td.Config.Clone()
		}
		cfg.ServerName = cand.name
		d = &tls.Dialer{NetDialer: td.NetDialer, Config: cfg}
	}
	return d.DialContext(ctx, "tcp", cand.addr)
}
