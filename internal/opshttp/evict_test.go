package opshttp

import (
	"net"
	"net/http"
	"testing"
)

// At the cap, evict closes the connection that has waited for its header
// the longest among those the server has tried to read; one it has not
// read yet goes only when no other waits.
func TestEvictPrefersConnectionsAlreadyRead(t *testing.T) {
	l := LimitListener(&http.Server{}, nil, 3).(*limitListener)
	conns := make([]*limitConn, 3)
	closed := map[*limitConn]bool{}
	for i := range conns {
		a, b := net.Pipe()
		defer b.Close()
		c := &limitConn{Conn: a, release: func() {}}
		conns[i] = c
		l.track(c, http.StateNew)
	}
	fresh, slowOld, slowNew := conns[0], conns[1], conns[2] // fresh is the oldest
	slowOld.tried.Store(true)
	slowNew.tried.Store(true)
	evicted := func() *limitConn {
		t.Helper()
		before := len(l.waiting)
		l.evict()
		for _, c := range conns {
			if _, ok := l.waiting[c]; !ok && !closed[c] {
				closed[c] = true
				return c
			}
		}
		t.Fatalf("evict closed nothing of %d waiting", before)
		return nil
	}
	for i, want := range []*limitConn{slowOld, slowNew, fresh} {
		if got := evicted(); got != want {
			t.Fatalf("eviction %d closed connection %p; want %p", i+1, got, want)
		}
	}
}
