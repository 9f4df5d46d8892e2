package client

import (
	"context"
	"crypto/tls"
	"net"
	"time"
)

// sessionState is what the server last told the client.
type sessionState uint8

const (
	stateSent    sessionState = iota // ACQUIRE sent, no reply yet
	stateWaiting                     // queued
	stateHeld                        // granted; never goes back
)

// ackEvent describes one acknowledged ACQUIRE or HEARTBEAT, for test observers.
type ackEvent struct {
	Heartbeat   bool // false for the reply to ACQUIRE
	RTT         time.Duration
	SmoothedRTT time.Duration
	Interval    time.Duration // until the next heartbeat, counted from this request's send
}

// session owns one attempt's connection and the real clock: it dials (on
// the caller's goroutine, see startLock), then on its own goroutine turns
// frames from the reader, its timer and Close into events for the rules
// (step.go), and carries out what they return — writes, the timer, the news
// for the Lock and the close. Nothing else touches its fields.
type session struct {
	lock    *Lock
	conn    net.Conn // nil until the dial succeeds
	frames  <-chan inbound
	observe func(ackEvent)
	m       machine

	timer   *time.Timer
	armed   time.Time // the timer's deadline; zero when stopped
	expired bool      // Valid's expiry has been stepped
	abort   bool      // the rules' last word: close abortively
}

func newSession(l *Lock, conn net.Conn, frames <-chan inbound, name string, lease time.Duration, leaseMS uint32, observe func(ackEvent)) *session {
	return &session{lock: l, conn: conn, frames: frames, observe: observe,
		m: newMachine(attempt{name: name, lease: lease, leaseMS: leaseMS, wait: waitForever})}
}

// connect steps the dial, dials and steps its outcome, on the caller's
// goroutine (see startLock). The dialer's context ends at the connect
// deadline or the wait's, whichever the rules' timer names first, or when
// ctx ends; the rules then hear why from the time the dial returned, since a
// deadline that has passed by an event's time is taken first. It reports
// whether the session is over; otherwise s.conn is up and ACQUIRE is sent.
// When the session is over and s.conn is set, the caller closes it.
func (s *session) connect(ctx context.Context, dial func(context.Context) (net.Conn, error)) (over bool) {
	r := s.m.step(event{kind: evDial, at: time.Now()})
	if s.apply(r) {
		return true
	}
	dialCtx, cancel := context.WithDeadline(ctx, earliest(r.dialBy, r.timer))
	conn, err := dial(dialCtx)
	cancel()
	if err != nil {
		r = s.m.step(event{kind: evReaderEnd, at: time.Now(), err: err})
	} else {
		s.conn = conn
		r = s.m.step(event{kind: evStart, at: time.Now()})
	}
	return s.apply(r)
}

// run steps every event of a live connection until the rules close it. The
// caller closes it, abortively when s.abort says so.
func (s *session) run() {
	frames, closing := s.frames, s.lock.closing
	for {
		var r ready
		select {
		case in := <-frames:
			if s.read(in, &frames) {
				return
			}
			continue
		case <-s.timer.C:
			s.armed = time.Time{}
			// A reply the reader already holds may move the deadline (it
			// counts from its request's send time), so it goes first.
			select {
			case in := <-frames:
				if s.read(in, &frames) {
					return
				}
			default:
			}
			r = s.m.step(event{kind: evTimer, at: time.Now()})
		case <-closing:
			closing = nil
			r = s.m.step(event{kind: evWorkStopped, at: time.Now()})
		}
		if s.apply(r) {
			return
		}
	}
}

// read steps in and the frames of the same read after it (the reader has
// them decoded already: nothing else is stepped between them). It sets
// *frames to nil once the reader has stopped, and reports whether the
// connection is to be closed.
func (s *session) read(in inbound, frames *<-chan inbound) bool {
	for {
		if in.final {
			*frames = nil
		}
		if s.apply(s.inbound(in)) {
			return true
		}
		if !in.more {
			return false
		}
		in = <-*frames
	}
}

// inbound steps one event from the reader. Once Valid has seen the deadline
// pass, the rules hear of it before the frame: a late answer must not revive
// the lock.
func (s *session) inbound(in inbound) ready {
	if !s.expired && s.lock.expired.Load() {
		s.expired = true
		if r := s.m.step(event{kind: evExpired, at: time.Now()}); s.apply(r) {
			return ready{close: true, abort: s.abort}
		}
	}
	if in.err != nil {
		return s.m.step(event{kind: evReaderEnd, at: in.at, err: in.err})
	}
	return s.m.step(event{kind: evFrame, at: in.at, typ: in.typ, token: in.token, more: in.more})
}

// apply carries out one step's actions, and those of the steps its writes
// lead to. It reports whether the connection is to be closed.
func (s *session) apply(r ready) bool {
	for {
		l := s.lock
		if r.granted {
			l.token.Store(s.m.token)
		}
		if !r.validUntil.IsZero() {
			l.setValidUntil(r.validUntil)
		}
		if r.granted {
			close(l.granted)
		}
		if r.answered {
			close(l.answered)
		}
		if r.acked {
			if int64(r.ack.RTT) > l.maxRTT.Load() {
				l.maxRTT.Store(int64(r.ack.RTT))
			}
			if s.observe != nil {
				s.observe(r.ack)
			}
		}
		if r.end {
			// The work is told at once; the connection may stay open a while
			// longer so that the server's expiry, not this close, hands the
			// lock on.
			l.end(r.err)
		}
		if r.close {
			s.abort = r.abort
			return true
		}
		if r.send == nil {
			s.arm(r.timer)
			return false
		}
		_ = s.conn.SetWriteDeadline(r.writeBy)
		_, err := s.conn.Write(r.send)
		r = s.m.step(event{kind: evWritten, at: time.Now(), err: err})
	}
}

// arm sets the one timer to fire at t (never when t is zero).
func (s *session) arm(t time.Time) {
	if t.Equal(s.armed) {
		return
	}
	s.timer.Stop()
	s.armed = t
	if !t.IsZero() {
		s.timer.Reset(time.Until(t))
	}
}

// closeConn closes the connection when the rules are done with it. A normal
// close follows the server's: the server closed first, so the TIME_WAIT
// entry is on its side. An abortive close (SO_LINGER {on, 0}) sends an RST
// instead of a FIN, which leaves no TIME_WAIT entry either; over TLS it
// closes the TCP connection under the records, without close_notify.
func closeConn(conn net.Conn, abort bool) error {
	if !abort {
		return conn.Close()
	}
	raw := conn
	if tc, ok := conn.(*tls.Conn); ok {
		raw = tc.NetConn()
	}
	if tcp, ok := raw.(interface{ SetLinger(sec int) error }); ok { // *net.TCPConn
		_ = tcp.SetLinger(0)
	}
	return raw.Close()
}
