package client

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/monolock/monolock/protocol"
)

// The session's rules as a pure step, in the style of etcd raft's Step and
// Ready: the session goroutine (session.go) turns what happens on the socket,
// the timer and the Lock into events stamped with the time it read, and
// carries out the actions each step returns. The rules never read a clock,
// touch the connection or block, so the tests drive them with an injected
// clock to the nanosecond (../protocol/testdata/step).

// eventKind says what happened.
type eventKind uint8

const (
	evStart       eventKind = iota // the connection is up: send ACQUIRE
	evWritten                      // the requested write returned (err: its failure)
	evFrame                        // the reader delivered WAITING or ACQUIRED
	evReaderEnd                    // the reader stopped, or the dial failed: err says why
	evTimer                        // the timer armed by the last step fired
	evWorkStopped                  // Close was called: the work has stopped (or the caller gave up)
	evExpired                      // Valid saw the give-up deadline pass
	evDial                         // the attempt begins: the connect (and TLS handshake) starts
)

// event is one input to the step. at is when it happened, by the monotonic
// clock; for a frame, when it was read.
type event struct {
	kind  eventKind
	at    time.Time
	typ   protocol.Type // evFrame
	token uint64        // evFrame
	err   error         // evWritten, evReaderEnd
	// more: another frame of the same read follows (evFrame). A frame can
	// answer only a request written before it was read, so a heartbeat the
	// frame makes due waits for the read's last frame.
	more bool
}

// ready is what one step asks the session goroutine to do, in this order:
// publish the answer, the grant, the new deadline and the acknowledgement;
// report the end; write send (and step evWritten when the write returns);
// then close the connection, or arm the timer.
type ready struct {
	answered   bool      // the server's first reply: close Lock.answered
	granted    bool      // the lock is granted with the machine's token
	validUntil time.Time // a new give-up deadline of the held lock, when not zero
	ack        ackEvent  // the acknowledgement, for observers, when acked
	acked      bool
	end        bool  // the session is over for the caller: call Lock.end(err)
	err        error // why, nil after Close
	send       []byte
	writeBy    time.Time // the write's deadline: the give-up deadline
	dialBy     time.Time // after evDial: the connect deadline, for the dialer's context
	timer      time.Time // when to step evTimer; zero: no timer
	close      bool      // close the connection; the machine takes no more events
	abort      bool      // with close: abortively (SO_LINGER 0: an RST, no TIME_WAIT)
}

// phase is where the session is in its life.
type phase uint8

const (
	phaseLive       phase = iota // requests and answers flow (before evStart: nothing has happened yet)
	phaseConnecting              // after evDial: the connect and TLS handshake are under way
	phaseLinger                  // given up while held: the connection stays open, nothing is sent
	phaseReleasing               // RELEASE sent: waiting, up to the release bound, for the server to close first
	phaseClosed                  // the connection is to be closed; no more events
)

// maxReleaseBound caps how long Close waits for the server to close after
// RELEASE: the release bound is min(lease, maxReleaseBound).
const maxReleaseBound = 2 * time.Second

// releaseBound is how long, after RELEASE is handed out, the client waits
// for the server's close before it closes abortively itself. A server that
// is alive closes half a round trip after RELEASE arrives; one that is not
// frees the lock by the lease anyway, so waiting longer than the lease buys
// nothing.
func releaseBound(lease time.Duration) time.Duration { return min(lease, maxReleaseBound) }

// waitForever is the wait of an attempt that waits for the grant as long as
// the caller lets it (Acquire, Enqueue): only a stop ends the wait.
const waitForever time.Duration = -1

// attempt is what one attempt is asked for: the lock, the lease, how long
// to wait for the grant and to connect, and the address(es) dialled (for
// messages).
type attempt struct {
	name           string
	lease          time.Duration
	leaseMS        uint32
	wait           time.Duration // waitForever, 0 (a try-lock) or how long to wait for the grant
	connectTimeout time.Duration
	target         string
}

// machine holds one connection's protocol state and applies the client rules
// (numbered in docs/protocol.md, "Writing a client in another language";
// the step itself is its section "The client step").
type machine struct {
	lease          time.Duration
	timeout        time.Duration // 0.8 × lease
	wait           time.Duration // as in attempt
	connectTimeout time.Duration
	target         string
	schedule       heartbeatSchedule
	acquire        []byte
	heartbeat      [protocol.HeartbeatLen]byte
	release        [protocol.ReleaseLen]byte

	phase        phase
	state        sessionState
	token        uint64
	dialed       bool      // the attempt began with evDial
	connectBy    time.Time // while connecting: the connect deadline
	waitBy       time.Time // the wait's deadline until the grant; zero: none
	inFlight     bool      // a request awaits its reply; at most one (rule 3)
	lastSend     time.Time // when the newest request was handed out for writing
	lastSent     time.Time // when the newest successful write returned
	deadline     time.Time // send of the newest acknowledged request + timeout; zero before the ACQUIRE
	heartbeatDue time.Time // when the next heartbeat goes out; zero while one is in flight
	heartbeats   int       // heartbeats sent so far
	closeBy      time.Time // while lingering: the latest close; while releasing: the release bound
}

func newMachine(a attempt) machine {
	m := machine{
		lease:          a.lease,
		timeout:        clientTimeout(a.lease),
		wait:           a.wait,
		connectTimeout: connectTimeout(a.connectTimeout),
		target:         a.target,
		schedule:       newHeartbeatSchedule(a.lease),
		acquire:        protocol.AppendAcquire(make([]byte, 0, protocol.AcquireHeaderLen+len(a.name)), a.leaseMS, a.name),
	}
	protocol.AppendHeartbeat(m.heartbeat[:0])
	protocol.AppendRelease(m.release[:0])
	return m
}

// step applies one event and returns what to do about it. Every deadline
// that has passed at the event's time is taken first, as if the timer had
// fired just before (docs/protocol.md, "The order of simultaneous things"):
// a frame or an end of stream read at the give-up deadline or later comes
// too late, whenever the driver's timer fires.
func (m *machine) step(ev event) ready {
	var r ready
	if m.phase == phaseClosed {
		return r
	}
	m.deadlines(ev, &r)
	if !r.close {
		switch m.phase {
		case phaseConnecting:
			m.connecting(ev, &r)
		case phaseLive:
			m.live(ev, &r)
		case phaseLinger:
			m.linger(ev, &r)
		case phaseReleasing:
			m.releasing(ev, &r)
		}
	}
	if r.close {
		m.phase = phaseClosed
	} else {
		r.timer = m.nextTimer()
	}
	return r
}

// passed reports whether deadline (not zero) has come at at: a deadline is
// taken at its own nanosecond, not one later.
func passed(at, deadline time.Time) bool {
	return !deadline.IsZero() && !at.Before(deadline)
}

// deadlines takes every deadline that has passed at ev.at, in time order;
// at the same time the connect deadline, then the give-up, then the wait.
func (m *machine) deadlines(ev event, r *ready) {
	at := ev.at
	switch m.phase {
	case phaseConnecting:
		switch {
		case passed(at, m.connectBy) && (m.waitBy.IsZero() || !m.waitBy.Before(m.connectBy)):
			cause := error(os.ErrDeadlineExceeded)
			if ev.kind == evReaderEnd {
				cause = ev.err
			}
			r.end, r.err = true, m.connectFailed(cause, true)
			r.close, r.abort = true, true // a TLS handshake may be under way
		case passed(at, m.waitBy):
			r.end, r.err = true, m.waitTimedOut()
			r.close, r.abort = true, true
		}
	case phaseLive:
		giveUp := passed(at, m.deadline)
		wait := m.state != stateHeld && passed(at, m.waitBy)
		switch {
		case wait && (!giveUp || m.waitBy.Before(m.deadline)):
			m.waitEnded(at, r)
		case giveUp:
			m.lose(m.timedOut(), at, r)
		default:
			return
		}
		if serverGone(ev) && m.phase != phaseLinger {
			// The event only decides how the connection ends: the server
			// closed first (an ERROR, the end of the stream) or the
			// connection is gone, so it is closed normally and nothing
			// more is written to it.
			r.send, r.close, r.abort = nil, true, false
		}
	case phaseLinger, phaseReleasing:
		if passed(at, m.closeBy) {
			r.close, r.abort = true, true
		}
	}
}

// serverGone reports whether ev says the server closed first (an ERROR, the
// end of the stream) or the connection is gone (a failed read or write).
func serverGone(ev event) bool {
	switch ev.kind {
	case evReaderEnd:
		return !errors.Is(ev.err, ErrProtocolViolation)
	case evWritten:
		return ev.err != nil && !errors.Is(ev.err, os.ErrDeadlineExceeded)
	}
	return false
}

// connecting waits for the connection: evStart sends ACQUIRE, a failed
// connect or handshake fails the attempt, a stop abandons it.
func (m *machine) connecting(ev event, r *ready) {
	switch ev.kind {
	case evStart:
		m.phase = phaseLive
		m.begin(ev.at, r)
	case evReaderEnd:
		r.end, r.err = true, m.connectFailed(ev.err, false)
		r.close = true
	case evWorkStopped:
		r.end = true
		r.close, r.abort = true, true
	}
}

// connectFailed is why the connect failed: err as a dial error naming the
// address, and the connect timeout when its deadline ended the connect.
func (m *machine) connectFailed(err error, timedOut bool) error {
	var e *dialError
	if !errors.As(err, &e) {
		e = &dialError{address: m.target, err: err}
	}
	if timedOut {
		e.timeout = m.connectTimeout
	}
	return e
}

// setWait starts the wait's clock at the attempt's first event.
func (m *machine) setWait(at time.Time) {
	if m.wait > 0 {
		m.waitBy = at.Add(m.wait)
	}
}

// begin sends ACQUIRE: the confirmation clock runs from it on (rule 8), so
// a server that never answers is a lost lock, too.
func (m *machine) begin(at time.Time, r *ready) {
	if !m.dialed {
		m.setWait(at)
	}
	m.deadline = at.Add(m.timeout)
	m.send(m.acquire, at, r)
}

func (m *machine) live(ev event, r *ready) {
	switch ev.kind {
	case evDial:
		if m.deadline.IsZero() && !m.dialed {
			m.phase, m.dialed = phaseConnecting, true
			m.connectBy = ev.at.Add(m.connectTimeout)
			m.setWait(ev.at)
			r.dialBy = m.connectBy
		}
	case evStart:
		if m.deadline.IsZero() {
			m.begin(ev.at, r)
		}
	case evWritten:
		if ev.err == nil {
			m.lastSent = ev.at
		} else if errors.Is(ev.err, os.ErrDeadlineExceeded) {
			// A write that blocks until the deadline: the lock is lost anyway.
			m.lose(m.timedOut(), ev.at, r)
		} else {
			m.lose(fmt.Errorf("%w: write: %v", ErrConnectionClosed, ev.err), ev.at, r)
		}
	case evFrame:
		m.receive(ev, r)
		if !ev.more {
			m.heartbeatIfDue(ev.at, r)
		}
	case evReaderEnd:
		m.lose(ev.err, ev.at, r)
	case evTimer:
		m.heartbeatIfDue(ev.at, r)
	case evWorkStopped:
		r.end = true
		m.startRelease(ev.at, r)
	case evExpired:
		m.lose(m.timedOut(), ev.at, r)
	}
}

// heartbeatIfDue sends the next heartbeat once its time has come (rule 3).
func (m *machine) heartbeatIfDue(at time.Time, r *ready) {
	if m.phase == phaseLive && r.send == nil && !m.heartbeatDue.IsZero() && !at.Before(m.heartbeatDue) {
		m.sendHeartbeat(at, r)
	}
}

// waitEnded ends an attempt that was not granted within its wait (or, for a
// try-lock, was queued): busy once queued, by silence when nothing answered
// yet. The place in the queue, or the ACQUIRE in flight, is released with
// RELEASE.
func (m *machine) waitEnded(at time.Time, r *ready) {
	r.end = true
	switch {
	case m.state == stateWaiting && m.wait == 0:
		r.err = ErrBusy
	case m.state == stateWaiting:
		r.err = fmt.Errorf("%w: not granted within the wait of %v", ErrBusy, m.wait)
	default:
		r.err = m.waitTimedOut()
	}
	m.startRelease(at, r)
}

func (m *machine) waitTimedOut() error {
	return fmt.Errorf("%w: no answer within the wait of %v", ErrHeartbeatTimeout, m.wait)
}

// startRelease ends a live session the way that leaves no TIME_WAIT on the
// client: RELEASE, after which the server, which reads it in order after
// every earlier request, frees the lock (or the place in the queue) and
// closes first. Whoever sends the first FIN keeps the TIME_WAIT entry; on
// the server it costs nothing (its port is fixed), on the client it costs
// an ephemeral port for 60 s. The write may take up to the release bound.
func (m *machine) startRelease(at time.Time, r *ready) {
	m.phase, m.closeBy = phaseReleasing, at.Add(releaseBound(m.lease))
	m.heartbeatDue = time.Time{}
	r.send, r.writeBy = m.release[:], m.closeBy
}

// releasing waits for the server to close after RELEASE. Whatever it sends
// meanwhile is the end of the session, never an error: answers to requests
// in flight, a promotion, an ERROR 0x13 from a server that predates RELEASE
// (which closes after it, and so releases too). The server's end of stream
// is the one outcome that closes normally, second; a failed write or read,
// or the release bound passing, closes abortively (an RST), and if that RST
// is lost the server frees the lock when the lease runs out, as for a
// crashed client.
func (m *machine) releasing(ev event, r *ready) {
	switch ev.kind {
	case evWritten:
		r.close, r.abort = ev.err != nil, ev.err != nil
	case evReaderEnd:
		var se *ServerError
		switch {
		case errors.Is(ev.err, errServerClosed):
			r.close = true
		case errors.As(ev.err, &se):
			// The reader goes on to the end of stream that follows an ERROR.
		default:
			r.close, r.abort = true, true
		}
	}
}

// receive applies a WAITING or ACQUIRED (rule 4). The server answers every
// request with exactly one frame, and additionally pushes one ACQUIRED when it
// promotes a waiter; anything else is a violation (rule 7).
func (m *machine) receive(ev event, r *ready) {
	switch {
	case ev.typ == protocol.TypeWaiting && m.state != stateHeld && m.inFlight:
		queued := m.state == stateSent
		r.answered = queued
		m.state = stateWaiting
		m.acknowledged(ev.at, r)
		if queued && m.wait == 0 {
			m.waitEnded(ev.at, r) // a try-lock: queued is busy
		}
	case ev.typ == protocol.TypeAcquired && m.state == stateSent:
		r.answered = true
		m.grant(ev.token, r)
		m.acknowledged(ev.at, r)
	case ev.typ == protocol.TypeAcquired && m.state == stateWaiting:
		// The promotion push. It answers no request: a heartbeat in flight gets
		// its own reply (WAITING before this frame, or ACQUIRED after it).
		m.grant(ev.token, r)
	case ev.typ == protocol.TypeAcquired && m.state == stateHeld && ev.token == m.token && m.inFlight:
		m.acknowledged(ev.at, r)
	default:
		m.lose(m.violation(ev), ev.at, r)
	}
}

func (m *machine) violation(ev event) error {
	switch {
	case ev.typ == protocol.TypeWaiting && m.state == stateHeld:
		return fmt.Errorf("%w: WAITING after ACQUIRED", ErrProtocolViolation)
	case ev.typ == protocol.TypeAcquired && m.state == stateHeld && ev.token != m.token:
		return fmt.Errorf("%w: token changed from %d to %d", ErrProtocolViolation, m.token, ev.token)
	}
	return fmt.Errorf("%w: frame 0x%02x with no request in flight", ErrProtocolViolation, uint8(ev.typ))
}

// grant records the token and lets the waiting caller go (rule 5). The
// wait's deadline no longer applies.
func (m *machine) grant(token uint64, r *ready) {
	m.state, m.token = stateHeld, token
	m.waitBy = time.Time{}
	r.granted = true
	r.validUntil = m.deadline
}

// acknowledged handles the reply to the request in flight: the server has seen
// that request, so the confirmation deadline moves to its send time + timeout,
// and the next heartbeat is due one interval after that send (rule 3) — at once
// if the reply itself came later than that (the caller sends it once the
// read's last frame is taken). A reply read at or after the deadline never
// gets here: the deadline was taken first.
func (m *machine) acknowledged(at time.Time, r *ready) {
	rtt := at.Sub(m.lastSend)
	m.schedule.observe(rtt)
	m.inFlight = false
	m.deadline = m.lastSend.Add(m.timeout)
	if m.state == stateHeld {
		r.validUntil = m.deadline
	}
	interval := m.schedule.interval()
	r.ack = ackEvent{Heartbeat: m.heartbeats > 0, RTT: rtt, SmoothedRTT: m.schedule.smoothedRTT(), Interval: interval}
	r.acked = true
	m.heartbeatDue = m.lastSend.Add(interval)
}

func (m *machine) sendHeartbeat(at time.Time, r *ready) {
	m.heartbeats++
	m.send(m.heartbeat[:], at, r)
}

// send hands one request out for writing. The write may not outlive the
// confirmation deadline.
func (m *machine) send(frame []byte, at time.Time, r *ready) {
	m.lastSend = at
	m.inFlight = true
	m.heartbeatDue = time.Time{}
	r.send, r.writeBy = frame, m.deadline
}

func (m *machine) timedOut() error {
	return fmt.Errorf("%w (%v)", ErrHeartbeatTimeout, m.timeout)
}

// lose ends the session with err, which the work is told at once. When the
// lock was held and the client gave up on its own (silence, a write that could
// not finish in time, a frame that breaks the protocol), the server still
// counts the lock as this client's: closing now would hand it to the next
// waiter at once, while the work, told to stop, may not have stopped yet. So
// the connection stays open (rule 7) until the work has stopped or the lease
// has passed since the last request written, whichever comes first; by then
// the server's own expiry may hand the lock on anyway. After an ERROR, end of
// stream or a failed read or write the server has already let go: the close
// happens at once, as it does when the lock was not held.
func (m *machine) lose(err error, at time.Time, r *ready) {
	r.end, r.err = true, err
	gaveUp := errors.Is(err, ErrHeartbeatTimeout) || errors.Is(err, ErrProtocolViolation)
	if m.state != stateHeld || !gaveUp {
		// The server has let go already (ERROR, end of stream, a broken
		// connection): a normal close. A session given up on (silence, a
		// server breaking the protocol) is closed abortively: the server is
		// unreachable or not to be trusted, and an RST leaves no TIME_WAIT.
		r.close, r.abort = true, gaveUp
		return
	}
	last := m.lastSent
	if last.Before(m.lastSend) {
		// The newest write did not complete; the server may have its start.
		last = m.lastSend
	}
	m.phase, m.closeBy = phaseLinger, last.Add(m.lease)
	m.heartbeatDue = time.Time{}
	if !at.Before(m.closeBy) {
		r.close, r.abort = true, true
	}
}

// linger waits for the end of the work or of the lease. No heartbeat is sent
// meanwhile, and nothing the server sends revives the lock. The session was
// given up on, so its end is abortive (an RST: no TIME_WAIT, and nothing
// more to say to a server that did not answer in time), unless the server
// has closed first.
func (m *machine) linger(ev event, r *ready) {
	switch ev.kind {
	case evReaderEnd:
		// A violation is the server's garbage: it may still count the lock as
		// ours. Anything else means the server closed or the connection broke:
		// nothing is left to hold.
		r.close = !errors.Is(ev.err, ErrProtocolViolation)
	case evWorkStopped:
		r.close, r.abort = true, true
	}
}

// nextTimer is when the next evTimer is due: the connect deadline or the
// wait's while connecting; the give-up deadline, the wait's or the next
// heartbeat while live; the latest close while lingering or releasing.
func (m *machine) nextTimer() time.Time {
	switch m.phase {
	case phaseConnecting:
		return earliest(m.connectBy, m.waitBy)
	case phaseLive:
		t := m.deadline
		if m.state != stateHeld {
			t = earliest(t, m.waitBy)
		}
		return earliest(t, m.heartbeatDue)
	case phaseLinger, phaseReleasing:
		return m.closeBy
	}
	return time.Time{}
}

// earliest is the sooner of two times, a zero time counting as none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}
