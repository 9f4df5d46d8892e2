package opshttp

import (
	"crypto/tls"
	"net"
	"net/http"
	"testing"
)

// At the cap, evict closes the connection that has waited for its header
// the longest among those that have sent something; one that has sent
// nothing goes only when no other waits, and only once Accept has given it
// its grace.
func TestEvictPrefersConnectionsThatSentSomething(t *testing.T) {
	l := LimitListener(&http.Server{}, nil, 3, nil).(*limitListener)
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
	slowOld.heard.Store(true)
	slowNew.heard.Store(true)
	evicted := func(silent bool) *limitConn {
		t.Helper()
		before := len(l.waiting)
		if !l.evict(silent) {
			t.Fatalf("evict(%v) closed nothing of %d waiting", silent, before)
		}
		for _, c := range conns {
			if _, ok := l.waiting[c]; !ok && !closed[c] {
				closed[c] = true
				return c
			}
		}
		t.Fatalf("evict closed nothing of %d waiting", before)
		return nil
	}
	for i, want := range []*limitConn{slowOld, slowNew} {
		if got := evicted(false); got != want {
			t.Fatalf("eviction %d closed connection %p; want %p", i+1, got, want)
		}
	}
	if l.evict(false) {
		t.Fatal("a connection that has sent nothing was closed before its grace")
	}
	if got := evicted(true); got != fresh {
		t.Fatalf("after the grace, eviction closed %p; want the fresh %p", got, fresh)
	}
}

// Over TLS net/http tracks the *tls.Conn, not the limitConn under it: the
// eviction still tells a silent connection (a TLS client that has sent no
// byte of its hello) from one that has sent something.
func TestEvictSeesThroughTLS(t *testing.T) {
	l := LimitListener(&http.Server{}, nil, 1, nil).(*limitListener)
	a, b := net.Pipe()
	defer b.Close()
	lc := &limitConn{Conn: a, release: func() {}}
	tc := tls.Server(lc, &tls.Config{})
	l.track(tc, http.StateNew)
	if l.evict(false) {
		t.Fatal("a TLS connection that has sent nothing was closed before its grace")
	}
	lc.heard.Store(true)
	if !l.evict(false) {
		t.Fatal("a TLS connection that has sent part of its handshake was not evicted")
	}
	if _, ok := l.waiting[tc]; ok {
		t.Fatal("the evicted connection is still tracked")
	}
}
