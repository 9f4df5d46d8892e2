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
// clock to the nanosecond (testdata/step).

// eventKind says what happened.
type eventKind uint8

const (
	evStart       eventKind = iota // the connection is up: send ACQUIRE
	evWritten                      // the requested write returned (err: its failure)
	evFrame                        // the reader delivered WAITING or ACQUIRED
	evReaderEnd                    // the reader stopped: err says why
	evTimer                        // the timer armed by the last step fired
	evWorkStopped                  // Close was called: the work has stopped
	evExpired                      // Valid saw the give-up deadline pass
)

// event is one input to the step. at is when it happened, by the monotonic
// clock; for a frame, when it was read.
type event struct {
	kind  eventKind
	at    time.Time
	typ   protocol.Type // evFrame
	token uint64        // evFrame
	err   error         // evWritten, evReaderEnd
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
	timer      time.Time // when to step evTimer; zero: no timer
	close      bool      // close the connection; the machine takes no more events
	abort      bool      // with close: abortively (SO_LINGER 0: an RST, no TIME_WAIT)
}

// phase is where the session is in its life.
type phase uint8

const (
	phaseLive      phase = iota // requests and answers flow
	phaseLinger                 // given up while held: the connection stays open, nothing is sent
	phaseReleasing              // RELEASE sent: waiting, up to the release bound, for the server to close first
	phaseClosed                 // the connection is to be closed; no more events
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

// machine holds one connection's protocol state and applies the client rules
// (numbered in docs/protocol.md, "Writing a client in another language").
type machine struct {
	lease     time.Duration
	timeout   time.Duration // 0.8 × lease
	schedule  heartbeatSchedule
	acquire   []byte
	heartbeat [protocol.HeartbeatLen]byte
	release   [protocol.ReleaseLen]byte

	phase        phase
	state        sessionState
	token        uint64
	inFlight     bool      // a request awaits its reply; at most one (rule 3)
	lastSend     time.Time // when the newest request was handed out for writing
	lastSent     time.Time // when the newest successful write returned
	deadline     time.Time // send of the newest acknowledged request + timeout
	heartbeatDue time.Time // when the next heartbeat goes out; zero while one is in flight
	heartbeats   int       // heartbeats sent so far
	closeBy      time.Time // while lingering: the latest close; while releasing: the release bound
}

func newMachine(name string, lease time.Duration, leaseMS uint32) machine {
	m := machine{
		lease:    lease,
		timeout:  clientTimeout(lease),
		schedule: newHeartbeatSchedule(lease),
		acquire:  protocol.AppendAcquire(make([]byte, 0, protocol.AcquireHeaderLen+len(name)), leaseMS, name),
	}
	protocol.AppendHeartbeat(m.heartbeat[:0])
	protocol.AppendRelease(m.release[:0])
	return m
}

// step applies one event and returns what to do about it.
func (m *machine) step(ev event) ready {
	var r ready
	switch m.phase {
	case phaseLive:
		m.live(ev, &r)
	case phaseLinger:
		m.linger(ev, &r)
	case phaseReleasing:
		m.releasing(ev, &r)
	case phaseClosed:
		return r
	}
	if r.close {
		m.phase = phaseClosed
	} else {
		r.timer = m.nextTimer()
	}
	return r
}

func (m *machine) live(ev event, r *ready) {
	switch ev.kind {
	case evStart:
		// The confirmation clock runs from the ACQUIRE on (rule 8): a server
		// that never answers is a lost lock, too.
		m.deadline = ev.at.Add(m.timeout)
		m.send(m.acquire, ev.at, r)
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
	case evReaderEnd:
		m.lose(ev.err, ev.at, r)
	case evTimer:
		if !ev.at.Before(m.deadline) {
			m.lose(m.timedOut(), ev.at, r)
		} else if !m.heartbeatDue.IsZero() && !ev.at.Before(m.heartbeatDue) {
			m.sendHeartbeat(ev.at, r)
		}
	case evWorkStopped:
		r.end = true
		m.startRelease(ev.at, r)
	case evExpired:
		m.lose(m.timedOut(), ev.at, r)
	}
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
	case evTimer:
		r.close = !ev.at.Before(m.closeBy)
		r.abort = r.close
	}
}

// receive applies a WAITING or ACQUIRED (rule 4). The server answers every
// request with exactly one frame, and additionally pushes one ACQUIRED when it
// promotes a waiter; anything else is a violation (rule 7).
func (m *machine) receive(ev event, r *ready) {
	switch {
	case ev.typ == protocol.TypeWaiting && m.state != stateHeld && m.inFlight:
		r.answered = m.state == stateSent
		m.state = stateWaiting
		m.acknowledged(ev.at, r)
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

// grant records the token and lets the waiting caller go (rule 5).
func (m *machine) grant(token uint64, r *ready) {
	m.state, m.token = stateHeld, token
	r.granted = true
	r.validUntil = m.deadline
}

// acknowledged handles the reply to the request in flight: the server has seen
// that request, so the confirmation deadline moves to its send time + timeout,
// and the next heartbeat is due one interval after that send (rule 3) — at once
// if the reply itself came later than that.
func (m *machine) acknowledged(at time.Time, r *ready) {
	// An answer read at or after the deadline comes too late: the lock was
	// given up at the deadline (rule 8), and Valid may already have said so.
	if !at.Before(m.deadline) {
		m.lose(m.timedOut(), at, r)
		return
	}
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
	if !at.Before(m.heartbeatDue) {
		m.sendHeartbeat(at, r)
	}
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
	case evTimer:
		r.close = !ev.at.Before(m.closeBy)
		r.abort = r.close
	case evWorkStopped:
		r.close, r.abort = true, true
	}
}

// nextTimer is when the next evTimer is due: the give-up deadline or the next
// heartbeat while live, the latest close while lingering.
func (m *machine) nextTimer() time.Time {
	switch m.phase {
	case phaseLive:
		if !m.heartbeatDue.IsZero() && m.heartbeatDue.Before(m.deadline) {
			return m.heartbeatDue
		}
		return m.deadline
	case phaseLinger, phaseReleasing:
		return m.closeBy
	}
	return time.Time{}
}
