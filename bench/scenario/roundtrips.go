package scenario

import (
	"context"
	"net"
	"sync/atomic"
)

// roundTrips counts the round trips of the connections it dials: a round
// trip begins with the first write after a read (or the connection's first
// write), so a request that the driver writes in several pieces before it
// waits for the answer counts once.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) count() int64 { return r.n.Load() }

// dial dials like net.Dialer and wraps the connection.
func (r *roundTrips) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &countedConn{Conn: c, trips: r}, nil
}

type countedConn struct {
	net.Conn
	trips   *roundTrips
	writing atomic.Bool // the last call was a write
}

func (c *countedConn) Write(p []byte) (int, error) {
	if !c.writing.Swap(true) {
		c.trips.n.Add(1)
	}
	return c.Conn.Write(p)
}

func (c *countedConn) Read(p []byte) (int, error) {
	c.writing.Store(false)
	return c.Conn.Read(p)
}
