package client

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/monolock/monolock/protocol"
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

// session is the goroutine that owns one connection's protocol state: it writes
// ACQUIRE and the heartbeats, checks every frame the reader delivers, and
// decides when the lock is lost. Nothing else touches its fields.
type session struct {
	lock    *Lock
	conn    net.Conn
	frames  <-chan inbound
	observe func(ackEvent)

	acquire   []byte
	heartbeat [protocol.HeartbeatLen]byte
	schedule  heartbeatSchedule
	timeout   time.Duration // 0.8 × lease

	state      sessionState
	token      uint64
	inFlight   bool      // a request awaits its reply; at most one (rule 3)
	lastSend   time.Time // when the newest request was written
	lastSent   time.Time // when the newest successful write returned
	deadline   time.Time // send time of the newest acknowledged request + timeout
	heartbeats int       // heartbeats written so far
	hbTimer    *time.Timer
	lossTimer  *time.Timer
}

func newSession(l *Lock, conn net.Conn, frames <-chan inbound, name string, lease time.Duration, leaseMS uint32, observe func(ackEvent)) *session {
	s := &session{
		lock:     l,
		conn:     conn,
		frames:   frames,
		observe:  observe,
		acquire:  protocol.AppendAcquire(make([]byte, 0, protocol.AcquireHeaderLen+len(name)), leaseMS, name),
		schedule: newHeartbeatSchedule(lease),
		timeout:  clientTimeout(lease),
	}
	protocol.AppendHeartbeat(s.heartbeat[:0])
	return s
}

// run sends ACQUIRE, then reacts to frames and timers until the lock ends. It
// returns nil after Close, otherwise the loss cause.
func (s *session) run() error {
	// The confirmation clock runs from the ACQUIRE on (rule 8): a server that
	// never answers is a lost lock, too.
	s.deadline = time.Now().Add(s.timeout)
	s.lossTimer = time.NewTimer(s.timeout)
	defer s.lossTimer.Stop()
	s.hbTimer = time.NewTimer(s.timeout)
	s.hbTimer.Stop()
	defer s.hbTimer.Stop()

	if err := s.send(s.acquire); err != nil {
		return err
	}
	for {
		select {
		case in := <-s.frames:
			if err := s.receive(in); err != nil {
				return err
			}
		case <-s.hbTimer.C:
			if err := s.sendHeartbeat(); err != nil {
				return err
			}
		case <-s.lossTimer.C:
			// A reply the reader already holds may move the deadline (it
			// counts from its request's send time), so it goes first.
			select {
			case in := <-s.frames:
				if err := s.receive(in); err != nil {
					return err
				}
			default:
			}
			if !time.Now().Before(s.deadline) {
				return s.timedOut()
			}
		case <-s.lock.closing:
			return nil
		}
	}
}

// send writes one request. The write may not outlive the confirmation deadline:
// a write that blocks that long means the lock is lost anyway.
func (s *session) send(frame []byte) error {
	s.lastSend = time.Now()
	s.inFlight = true
	_ = s.conn.SetWriteDeadline(s.deadline)
	if _, err := s.conn.Write(frame); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return s.timedOut()
		}
		return fmt.Errorf("%w: write: %v", ErrConnectionClosed, err)
	}
	s.lastSent = time.Now()
	return nil
}

func (s *session) timedOut() error {
	return fmt.Errorf("%w (%v)", ErrHeartbeatTimeout, s.timeout)
}

// receive applies one event from the reader: a WAITING or ACQUIRED (rule 4),
// or the error that ended the connection. The server answers every
// request with exactly one frame, and additionally pushes one ACQUIRED when it
// promotes a waiter; anything else is a violation (rule 7).
func (s *session) receive(in inbound) error {
	if in.err != nil {
		return in.err
	}
	switch {
	case in.typ == protocol.TypeWaiting && s.state != stateHeld && s.inFlight:
		first := s.state == stateSent
		s.state = stateWaiting
		if first {
			close(s.lock.answered)
		}
		return s.acknowledged(in.at)
	case in.typ == protocol.TypeAcquired && s.state == stateSent:
		s.grant(in.token)
		close(s.lock.answered)
		return s.acknowledged(in.at)
	case in.typ == protocol.TypeAcquired && s.state == stateWaiting:
		// The promotion push. It answers no request: a heartbeat in flight gets
		// its own reply (WAITING before this frame, or ACQUIRED after it).
		s.grant(in.token)
		return nil
	case in.typ == protocol.TypeAcquired && s.state == stateHeld && in.token == s.token && s.inFlight:
		return s.acknowledged(in.at)
	}
	return s.violation(in)
}

func (s *session) violation(in inbound) error {
	switch {
	case in.typ == protocol.TypeWaiting && s.state == stateHeld:
		return fmt.Errorf("%w: WAITING after ACQUIRED", ErrProtocolViolation)
	case in.typ == protocol.TypeAcquired && s.state == stateHeld && in.token != s.token:
		return fmt.Errorf("%w: token changed from %d to %d", ErrProtocolViolation, s.token, in.token)
	}
	return fmt.Errorf("%w: frame 0x%02x with no request in flight", ErrProtocolViolation, uint8(in.typ))
}

// grant records the token and lets the waiting caller go (rule 5).
func (s *session) grant(token uint64) {
	s.state, s.token = stateHeld, token
	s.lock.token.Store(token)
	s.lock.setValidUntil(s.deadline)
	close(s.lock.granted)
}

// acknowledged handles the reply to the request in flight: the server has seen
// that request, so the confirmation deadline moves to its send time + timeout,
// and the next heartbeat is due one interval after that send (rule 3) — at once
// if the reply itself came later than that.
func (s *session) acknowledged(at time.Time) error {
	// An answer read after the deadline comes too late: the lock was given up
	// at the deadline (rule 8), and Valid may already have said so.
	if !at.Before(s.deadline) || s.lock.expired.Load() {
		return s.timedOut()
	}
	rtt := at.Sub(s.lastSend)
	s.schedule.observe(rtt)
	s.inFlight = false
	s.deadline = s.lastSend.Add(s.timeout)
	if s.state == stateHeld {
		s.lock.setValidUntil(s.deadline)
	}
	s.lossTimer.Reset(time.Until(s.deadline))
	interval := s.schedule.interval()
	if s.observe != nil {
		s.observe(ackEvent{Heartbeat: s.heartbeats > 0, RTT: rtt, SmoothedRTT: s.schedule.smoothedRTT(), Interval: interval})
	}
	if wait := time.Until(s.lastSend.Add(interval)); wait > 0 {
		s.hbTimer.Reset(wait)
		return nil
	}
	return s.sendHeartbeat()
}

func (s *session) sendHeartbeat() error {
	s.heartbeats++
	return s.send(s.heartbeat[:])
}

// linger keeps the connection open after a loss while the work may still run
// (rule 7). When the lock was held and the client gave up on its own (silence,
// a write that could not finish in time, a frame that breaks the protocol),
// the server still counts the lock as this client's: closing now would hand it
// to the next waiter at once, while the work, told to stop, may not have
// stopped yet. So the connection is closed when the caller closes the lock
// (the work has stopped) or at the end of the lease counted from the last
// request written, whichever comes first; by then the server's own expiry may
// hand the lock on anyway. No heartbeat is sent meanwhile, and nothing the
// server sends revives the lock. After Close, an ERROR, end of stream or a
// failed read or write the server has already let go, or the caller asked
// for the close: it happens at once.
func (s *session) linger(err error) {
	if err == nil || s.state != stateHeld ||
		!(errors.Is(err, ErrHeartbeatTimeout) || errors.Is(err, ErrProtocolViolation)) {
		return
	}
	last := s.lastSent
	if last.IsZero() || last.Before(s.lastSend) {
		// The newest write did not complete; the server may have its start.
		last = s.lastSend
	}
	expiry := time.NewTimer(time.Until(last.Add(s.lock.lease)))
	defer expiry.Stop()
	frames := s.frames
	for {
		select {
		case in := <-frames:
			if in.err == nil {
				continue // too late to count
			}
			frames = nil // the reader has stopped
			if !errors.Is(in.err, ErrProtocolViolation) {
				return // the server closed or the connection broke: nothing left to hold
			}
		case <-expiry.C:
			return
		case <-s.lock.closing:
			return
		}
	}
}
