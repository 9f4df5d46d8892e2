package client

import (
	"context"
	"crypto/tls"
	"net"
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
	// Address is the server's host:port; DefaultAddress when empty.
	Address string
	// Dialer opens connections; &net.Dialer{} when nil. Use a *tls.Dialer for
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
	address        string
	dialer         Dialer
	connectTimeout time.Duration

	// observe, when set by tests, sees every acknowledged ACQUIRE or HEARTBEAT.
	// It runs on the session goroutine and must not block.
	observe func(ackEvent)
}

// New returns a Client for cfg.
func New(cfg Config) *Client {
	c := &Client{address: cfg.Address, dialer: cfg.Dialer, connectTimeout: connectTimeout(cfg.ConnectTimeout)}
	if c.address == "" {
		c.address = DefaultAddress
	}
	if c.dialer == nil {
		c.dialer = &net.Dialer{}
	}
	c.dialer = withSessionCache(c.dialer)
	return c
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
