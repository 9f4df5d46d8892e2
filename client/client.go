package client

import (
	"context"
	"net"
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
	// Dialer opens connections; &net.Dialer{} when nil. Use a *tls.Dialer for TLS.
	Dialer Dialer
}

// Client acquires locks from one monolock server. It holds no connection of its
// own (every lock is its own connection), so it is safe for concurrent use and
// needs no closing.
type Client struct {
	address string
	dialer  Dialer

	// observe, when set by tests, sees every acknowledged ACQUIRE or HEARTBEAT.
	// It runs on the session goroutine and must not block.
	observe func(ackEvent)
}

// New returns a Client for cfg.
func New(cfg Config) *Client {
	c := &Client{address: cfg.Address, dialer: cfg.Dialer}
	if c.address == "" {
		c.address = DefaultAddress
	}
	if c.dialer == nil {
		c.dialer = &net.Dialer{}
	}
	return c
}
