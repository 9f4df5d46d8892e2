package main

import (
	"fmt"
	"time"

	"github.com/rs/zerolog"
)

// The daemon's life is one state machine, fed every event that can end or
// change it — the signals, the shutdown delay's timer, a server that stops
// on its own, the end of the stop sequence — and answering with what to do.
// It is pure (no clock, no channel, no signal), so every transition is
// tested by feeding it events (lifecycle_test.go); supervise (supervise.go)
// turns channels into events and actions into effects.
//
//	phase     SIGHUP   SIGTERM/SIGINT              delay over   server failed        stop done
//	running   reload   drain; draining, or         -            exit 1 at once       -
//	                   stop if there is no delay
//	draining  reload   stop (the delay ends early) stop         stop                 -
//	stopping  -        hurry (once)                -            -                    exit with its status
//
// SIGHUP reloads while the protocol port admits new connections (running
// and draining: a connection that arrives during the delay is served, with
// the current certificate and ACL) and is ignored once the server stops
// admitting them. No event is ever an exit but the two in the table: a
// SIGHUP, however many, never ends the process, and after SIGTERM the exit
// status is the stop sequence's.
type lifecycle struct {
	phase   phase
	delay   time.Duration // the shutdown delay; 0: stop at the first signal
	hurried bool          // the stop sequence was told to cut short
}

type phase int

const (
	running  phase = iota // serving; /readyz answers 200
	draining              // /readyz answers 503; the protocol port serves on for the delay
	stopping              // sessions get ERROR 0x01, the HTTP sides stop, the audit log flushes
	exited                // nothing more happens
)

func (p phase) String() string {
	switch p {
	case running:
		return "running"
	case draining:
		return "draining"
	case stopping:
		return "stopping"
	case exited:
		return "exited"
	}
	return fmt.Sprintf("phase(%d)", int(p))
}

// event is what happened: status is that of evStopDone, err that of
// evFailed.
type event struct {
	kind   eventKind
	status int
	err    error
}

type eventKind int

const (
	evReload    eventKind = iota // SIGHUP
	evTerminate                  // SIGTERM or SIGINT
	evDelayOver                  // the shutdown delay's timer fired
	evFailed                     // a server stopped on its own
	evStopDone                   // the stop sequence finished
)

func (k eventKind) String() string {
	switch k {
	case evReload:
		return "reload"
	case evTerminate:
		return "terminate"
	case evDelayOver:
		return "delay-over"
	case evFailed:
		return "failed"
	case evStopDone:
		return "stop-done"
	}
	return fmt.Sprintf("event(%d)", int(k))
}

// actions is what a step asks for, applied in the order of the fields, the
// note (the log line that says why; empty: nothing to say) after armDelay.
type actions struct {
	reload   bool // reread TLS files, ticket keys and ACL; reopen the audit log
	drain    bool // /healthz and /readyz answer 503 from now on
	armDelay bool // start the shutdown delay's timer
	stop     bool // begin the stop sequence, bounded by shutdownGrace
	hurry    bool // cut the stop sequence short
	exit     bool // return status from the process
	status   int
	note     string
	level    zerolog.Level // of note
}

func newLifecycle(delay time.Duration) *lifecycle {
	return &lifecycle{delay: delay}
}

// step moves the machine by one event.
func (m *lifecycle) step(ev event) actions {
	switch m.phase {
	case running:
		switch ev.kind {
		case evReload:
			return actions{reload: true}
		case evTerminate:
			if m.delay > 0 {
				m.phase = draining
				return actions{drain: true, armDelay: true,
					note: "readiness is 503; serving on for the shutdown delay before sessions get ERROR 0x01", level: zerolog.InfoLevel}
			}
			m.phase = stopping
			return actions{drain: true, stop: true, note: "shutting down: every session gets ERROR 0x01", level: zerolog.InfoLevel}
		case evFailed:
			m.phase = exited
			return actions{exit: true, status: 1, note: "server stopped unexpectedly", level: zerolog.ErrorLevel}
		}
	case draining:
		switch ev.kind {
		case evReload:
			return actions{reload: true}
		case evTerminate:
			m.phase = stopping
			return actions{stop: true, note: "second signal: shutdown delay ended early; every session gets ERROR 0x01", level: zerolog.InfoLevel}
		case evDelayOver:
			m.phase = stopping
			return actions{stop: true, note: "shutdown delay over: every session gets ERROR 0x01", level: zerolog.InfoLevel}
		case evFailed:
			m.phase = stopping
			return actions{stop: true, note: "a server stopped during the shutdown delay; shutting down now", level: zerolog.ErrorLevel}
		}
	case stopping:
		switch ev.kind {
		case evTerminate:
			if m.hurried {
				return actions{}
			}
			m.hurried = true
			return actions{hurry: true, note: "another signal: the shutdown is cut short", level: zerolog.WarnLevel}
		case evStopDone:
			m.phase = exited
			return actions{exit: true, status: ev.status}
		}
	}
	return actions{}
}
