package auditcheck

import (
	"io"
	"time"
)

// Event is one line of an audit log, decoded: the fields the harnesses read
// beside Check. Event is one of internal/audit's names (audit.EventGranted…)
// or a newer one; Token and Reason are zero where the event has none.
type Event struct {
	Line       int // line number in the stream, from 1
	Time       time.Time
	Event      string
	Lock       string
	Token      uint64
	Reason     string // released: why (graceful, expired, shutdown…)
	RemoteAddr string
	// Operator is who asked for a force_release or a kick_waiter: the admin
	// caller's certificate identity, "" without mutual TLS on the admin
	// port, or in a log written before the server recorded it.
	Operator string
}

// Read reads an audit stream (JSON lines, as the server writes them) with
// the parser Check uses and returns its events in line order. A line that is
// not an audit event (as Check's BadLines) is returned in bad, not in events,
// so that the caller decides: a harness whose server ran to a clean end
// treats any as an error; one that SIGKILLed its server may see a torn last
// line. Blank lines are skipped. err is a read error only.
func Read(r io.Reader) (events []Event, bad []LineError, err error) {
	lr := newLineReader(r)
	for {
		n, l, at, lineErr, err := lr.next()
		if err == io.EOF {
			return events, bad, nil
		}
		if err != nil {
			return events, bad, err
		}
		if lineErr != nil {
			bad = append(bad, LineError{Line: n, Err: lineErr})
			continue
		}
		ev := Event{Line: n, Time: at, Event: *l.Event, Reason: l.Reason, RemoteAddr: l.RemoteAddr, Operator: l.Operator}
		if l.Lock != nil {
			ev.Lock = *l.Lock
		}
		if l.Token != nil {
			ev.Token = *l.Token
		}
		events = append(events, ev)
	}
}
