package main

import (
	"fmt"
	"io"
	"time"

	"github.com/monolock/monolock/internal/auditcheck"
)

// Release reasons: the holders a SIGTERM closed, and the holders whose lease
// ran out without a heartbeat.
const (
	reasonShutdown = "shutdown"
	reasonExpired  = "expired"
)

// ServerRun is the history of one server process.
type ServerRun struct {
	// StartedAt is taken before the process is spawned: no grant of this run
	// can be earlier.
	StartedAt time.Time
	// StoppedAt is when the harness sent SIGTERM (zero if it never did).
	StoppedAt time.Time
	// ExitedAt is when the process was seen to exit.
	ExitedAt time.Time
	// Exit describes an abnormal end ("" when SIGTERM led to exit status 0).
	Exit   string
	Events []auditcheck.Event
}

// ClientGrant is what one client recorded about one grant it was told of.
type ClientGrant struct {
	ID     int
	Client int
	Lock   string
	Token  uint64
	Lease  time.Duration
	Mode   string // "do" (DoRetry) or "handle" (Acquire and the Lock handle)
	// GrantedAt: when the guarded code started (fn called, Acquire returned).
	GrantedAt time.Time
	// LostAt: when the client saw its lock context cancelled by a loss
	// (heartbeat timeout, connection lost, server error); zero if it never was
	// before the code gave the lock up.
	LostAt    time.Time
	LossCause string
	// EndedAt: when the guarded code returned, before the release.
	EndedAt time.Time
	// ValidUntil: the client's give-up deadline as the Lock said when the
	// code returned (Lock.ValidUntil: the send of the newest answered request
	// plus 0.8 × lease; it keeps its value after a loss). From then on
	// Lock.Valid, which the guarded code checks before each write, is false.
	ValidUntil time.Time
}

// GaveUpAt is the end of the client's belief that it held the lock: the first
// of its give-up deadline, the loss notice and the end of its guarded code.
// The deadline comes first when the lock was lost by a heartbeat timeout:
// Valid reads the clock at the deadline itself, while the context is
// cancelled by a timer, which a loaded machine runs late (CancelLag).
func (g ClientGrant) GaveUpAt() time.Time {
	var first time.Time
	for _, t := range []time.Time{g.ValidUntil, g.LostAt, g.EndedAt} {
		if !t.IsZero() && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	return first
}

// CancelLag is how long after the give-up deadline the lock's context was
// cancelled, for a grant lost after its deadline had passed (0 otherwise).
func (g ClientGrant) CancelLag() time.Duration {
	if g.LostAt.IsZero() || g.ValidUntil.IsZero() || !g.LostAt.After(g.ValidUntil) {
		return 0
	}
	return g.LostAt.Sub(g.ValidUntil)
}

// History is everything the checkers look at.
type History struct {
	Runs   []ServerRun   // in the order the servers ran
	Grants []ClientGrant // client side, any order
	Writes []Write       // the resource's history, in its order
}

// ParseAudit reads an audit log with internal/auditcheck's reader. The
// harness stops its servers with SIGTERM and reads the log after the exit,
// so a line that is not an audit event is an error here.
func ParseAudit(r io.Reader) ([]auditcheck.Event, error) {
	events, bad, err := auditcheck.Read(r)
	if err != nil {
		return nil, err
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("audit %v (and %d more bad lines)", &bad[0], len(bad)-1)
	}
	return events, nil
}
