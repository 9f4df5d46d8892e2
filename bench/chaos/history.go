package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// Audit event names written by internal/audit.
const (
	eventGranted  = "granted"
	eventReleased = "released"
)

// Release reasons: the holders a SIGTERM closed, and the holders whose lease
// ran out without a heartbeat.
const (
	reasonShutdown = "shutdown"
	reasonExpired  = "expired"
)

// AuditEvent is one line of a server's audit log.
type AuditEvent struct {
	Time   time.Time
	Event  string
	Lock   string
	Token  uint64
	Reason string // released only
}

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
	Events []AuditEvent
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
}

// GaveUpAt is the end of the client's belief that it held the lock: the first
// of the loss notice and the end of its guarded code.
func (g ClientGrant) GaveUpAt() time.Time {
	switch {
	case g.LostAt.IsZero():
		return g.EndedAt
	case g.EndedAt.IsZero() || g.LostAt.Before(g.EndedAt):
		return g.LostAt
	}
	return g.EndedAt
}

// History is everything the checkers look at.
type History struct {
	Runs   []ServerRun   // in the order the servers ran
	Grants []ClientGrant // client side, any order
	Writes []Write       // the resource's history, in its order
}

type auditLine struct {
	Time   string `json:"time"`
	Event  string `json:"event"`
	Lock   string `json:"lock"`
	Token  uint64 `json:"token"`
	Reason string `json:"reason"`
}

// ParseAudit reads an audit log: one JSON object per line.
func ParseAudit(r io.Reader) ([]AuditEvent, error) {
	var events []AuditEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var l auditLine
		if err := json.Unmarshal(line, &l); err != nil {
			return nil, fmt.Errorf("audit line %d: %w", n, err)
		}
		t, err := time.Parse(time.RFC3339Nano, l.Time)
		if err != nil {
			return nil, fmt.Errorf("audit line %d: time: %w", n, err)
		}
		events = append(events, AuditEvent{Time: t, Event: l.Event, Lock: l.Lock, Token: l.Token, Reason: l.Reason})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return events, nil
}
