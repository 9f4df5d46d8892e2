package eventloop

import (
	"testing"
	"time"
)

// turnsConn is a rig connection whose handshake reports the server's turns
// the test sets, as a tlsSession reports its handshake's (tlsconn).
type turnsConn struct {
	*fakeConn
	ended  time.Duration
	server bool
}

func (c *turnsConn) serverTurns() (time.Duration, bool) { return c.ended, c.server }

// A session whose handshake is the server's turn is not closed by
// io-timeout, however long the turn; what was the server's is left out of
// the ACQUIRE's io-timeout, up to maxExcused io-timeouts.
func TestRuleServerTurnsAreExcused(t *testing.T) {
	r := newRig(t, Config{IOTimeout: time.Second})
	o := r.o
	c := &turnsConn{fakeConn: r.peer().fakeConn, server: true}
	s := &session{conn: c}
	if excused, server := o.serverTurns(s); excused != 0 || !server {
		t.Fatalf("server's turn: excused %v, %v", excused, server)
	}
	c.ended, c.server = 3*time.Second, false
	if excused, server := o.serverTurns(s); excused != 3*time.Second || server {
		t.Fatalf("client's turn after 3 s of the server's: excused %v, server's turn %v", excused, server)
	}
	c.ended = time.Hour
	if excused, _ := o.serverTurns(s); excused != maxExcused*time.Second {
		t.Fatalf("an hour of the server's turns: excused %v, want the cap %v", excused, maxExcused*time.Second)
	}
	if excused := o.excusable(time.Hour); excused != maxExcused*time.Second {
		t.Fatalf("an hour of the server's turns, at the handshake's end: excused %v, want the cap %v", excused, maxExcused*time.Second)
	}
	c.server = true
	if _, server := o.serverTurns(s); server {
		t.Fatal("past the cap, a server's turn must no longer hold the timer off")
	}
	plain := &session{conn: r.peer().fakeConn}
	if excused, server := o.serverTurns(plain); excused != 0 || server {
		t.Fatalf("a plain session: excused %v, %v", excused, server)
	}
}
