package auditcheck

import (
	"github.com/monolock/monolock/internal/audit"

	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// MaxLineLen is the longest audit line Check reads. Real lines are a few
// hundred bytes (lock names are at most 255 bytes).
const MaxLineLen = 1 << 20

// Report is what Check found in an audit stream.
type Report struct {
	Lines      int            // event lines read (blank lines are skipped)
	Events     map[string]int // count per event name, unknown events included
	Locks      int            // distinct lock names in any event
	First      time.Time      // time of the earliest event (zero without events)
	Last       time.Time      // time of the latest event
	MaxToken   uint64         // largest token granted
	StillHeld  []Holding      // holders without a release at the end, by lock name
	Violations []Violation    // in line order
}

// Holding is a grant that had not been released at the end of the stream.
// That is normal for a live server's file.
type Holding struct {
	Lock       string
	Token      uint64
	RemoteAddr string
	Line       int // line of the grant
}

// Violation is a line that breaks the history's rules.
type Violation struct {
	Line int
	Lock string
	What string
}

func (v Violation) String() string {
	return fmt.Sprintf("line %d: lock %q: %s", v.Line, v.Lock, v.What)
}

// LineError is a line that is not an audit event: not a JSON object, or a
// known event without its fields.
type LineError struct {
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// OK reports whether the history has no violations.
func (r Report) OK() bool { return len(r.Violations) == 0 }

// knownEvents is the order String lists the event counts in; unknown events
// follow, sorted by name.
var knownEvents = []string{audit.EventGranted, audit.EventReleased, audit.EventForceRelease, audit.EventKickWaiter, audit.EventDenied}

// String renders the report for people: a summary, the locks still held and
// every violation.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "events:     %d (", r.Lines)
	var unknown []string
	for name := range r.Events {
		if !slices.Contains(knownEvents, name) {
			unknown = append(unknown, name)
		}
	}
	slices.Sort(unknown)
	for i, name := range append(slices.Clone(knownEvents), unknown...) {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", name, r.Events[name])
	}
	b.WriteString(")\n")
	fmt.Fprintf(&b, "locks:      %d\n", r.Locks)
	if r.Lines > 0 {
		fmt.Fprintf(&b, "time:       %s .. %s\n", r.First.Format(time.RFC3339Nano), r.Last.Format(time.RFC3339Nano))
	}
	if r.MaxToken > 0 {
		fmt.Fprintf(&b, "max token:  %d\n", r.MaxToken)
	}
	fmt.Fprintf(&b, "still held: %d\n", len(r.StillHeld))
	for _, h := range r.StillHeld {
		fmt.Fprintf(&b, "  lock %q: token %d to %s (granted on line %d)\n", h.Lock, h.Token, h.RemoteAddr, h.Line)
	}
	if r.OK() {
		b.WriteString("violations: none\n")
		return b.String()
	}
	fmt.Fprintf(&b, "violations: %d\n", len(r.Violations))
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "  %s\n", v)
	}
	return b.String()
}

// line is the part of an audit event Check reads; other fields are ignored.
type line struct {
	Time       *string `json:"time"`
	Event      *string `json:"event"`
	Lock       *string `json:"lock"`
	RemoteAddr string  `json:"remote_addr"`
	Token      *uint64 `json:"token"` // decoded exactly: tokens are about 2^62
}

// lockState is one lock's holder while Check reads.
type lockState struct {
	held       bool
	token      uint64
	remoteAddr string
	line       int
}

// Check reads an audit stream (JSON lines, as the server writes them) and
// checks its history:
//
//   - per lock, granted and released alternate: a grant while the lock is
//     held means two holders, a release without a holder is a violation;
//   - a release carries the token of the current holder, and so does a
//     force_release;
//   - tokens strictly increase across all grants in the stream (also across
//     server restarts, whose tokens start higher).
//
// Unknown events and fields are ignored; blank lines are skipped. Holders
// without a release at the end are listed as still held, not as violations.
// A line that is not an audit event ends the check with a *LineError and the
// report up to the line before; a read error ends it likewise.
func Check(r io.Reader) (Report, error) {
	rep := Report{Events: map[string]int{}}
	locks := map[string]*lockState{}
	var lastToken uint64
	lastTokenLine := 0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLineLen)
	n := 0
	for sc.Scan() {
		n++
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		ev, at, err := parseLine(raw)
		if err != nil {
			rep.finish(locks)
			return rep, &LineError{Line: n, Err: err}
		}
		rep.Lines++
		rep.Events[*ev.Event]++
		if rep.Lines == 1 || at.Before(rep.First) {
			rep.First = at
		}
		if rep.Lines == 1 || at.After(rep.Last) {
			rep.Last = at
		}
		if ev.Lock == nil {
			continue // an unknown event without a lock
		}
		name := *ev.Lock
		st := locks[name]
		if st == nil {
			st = &lockState{}
			locks[name] = st
		}
		violation := func(format string, args ...any) {
			rep.Violations = append(rep.Violations, Violation{Line: n, Lock: name, What: fmt.Sprintf(format, args...)})
		}
		// holderToken checks that a release or a force_release (what says
		// which, in the violation's text) names the current holder's token.
		holderToken := func(what string, token uint64) {
			switch {
			case !st.held:
				violation("%s %d without a holder", what, token)
			case token != st.token:
				violation("%s %d, but the holder has token %d (granted on line %d)", what, token, st.token, st.line)
			}
		}
		switch *ev.Event {
		case audit.EventGranted:
			token := *ev.Token
			if st.held {
				violation("granted token %d to %s while token %d (granted on line %d to %s) still held it: two holders (or the server stopped without recording the release)",
					token, ev.RemoteAddr, st.token, st.line, st.remoteAddr)
			}
			switch {
			case token == 0:
				violation("granted token 0: tokens are never 0")
			case lastTokenLine > 0 && token <= lastToken:
				violation("granted token %d, not greater than token %d granted on line %d: tokens must strictly increase", token, lastToken, lastTokenLine)
			}
			if token > rep.MaxToken {
				rep.MaxToken = token
			}
			lastToken, lastTokenLine = token, n
			*st = lockState{held: true, token: token, remoteAddr: ev.RemoteAddr, line: n}
		case audit.EventReleased:
			holderToken("released token", *ev.Token)
			*st = lockState{}
		case audit.EventForceRelease:
			holderToken("force_release of token", *ev.Token)
			// The holder's released event follows.
		}
	}
	rep.finish(locks)
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return rep, &LineError{Line: n + 1, Err: fmt.Errorf("line longer than %d bytes", MaxLineLen)}
		}
		return rep, err
	}
	return rep, nil
}

// parseLine decodes one event and checks the fields its event needs.
func parseLine(raw []byte) (line, time.Time, error) {
	var ev line
	if err := json.Unmarshal(raw, &ev); err != nil {
		return ev, time.Time{}, fmt.Errorf("not a JSON audit event: %v", err)
	}
	if ev.Event == nil {
		return ev, time.Time{}, errors.New(`no "event" field`)
	}
	if ev.Time == nil {
		return ev, time.Time{}, errors.New(`no "time" field`)
	}
	at, err := time.Parse(time.RFC3339Nano, *ev.Time)
	if err != nil {
		return ev, time.Time{}, fmt.Errorf(`"time" is not an RFC 3339 time: %v`, err)
	}
	switch *ev.Event {
	case audit.EventGranted, audit.EventReleased, audit.EventForceRelease, audit.EventDenied, audit.EventKickWaiter:
		if ev.Lock == nil || *ev.Lock == "" {
			return ev, at, fmt.Errorf(`%s event without a "lock"`, *ev.Event)
		}
	}
	switch *ev.Event {
	case audit.EventGranted, audit.EventReleased, audit.EventForceRelease:
		if ev.Token == nil {
			return ev, at, fmt.Errorf(`%s event without a "token"`, *ev.Event)
		}
	}
	return ev, at, nil
}

// finish lists the holders left at the end.
func (rep *Report) finish(locks map[string]*lockState) {
	rep.Locks = len(locks)
	rep.StillHeld = nil
	for name, st := range locks {
		if st.held {
			rep.StillHeld = append(rep.StillHeld, Holding{Lock: name, Token: st.token, RemoteAddr: st.remoteAddr, Line: st.line})
		}
	}
	slices.SortFunc(rep.StillHeld, func(a, b Holding) int { return strings.Compare(a.Lock, b.Lock) })
}
