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

// MaxLineLen is the longest audit line Check reads; a longer one is reported
// as a bad line. Real lines are a few hundred bytes (lock names are at most
// 255 bytes).
const MaxLineLen = 1 << 20

// MaxListed is how many violations, and how many bad lines, a Report lists;
// the rest are counted. It keeps the memory of a check of a badly broken file
// bounded.
const MaxListed = 1000

// Report is what Check found in an audit stream.
type Report struct {
	Lines      int            // event lines read (blank and bad lines are not counted)
	Events     map[string]int // count per event name, unknown events included
	MaxHeld    int            // the most locks held at the same time
	First      time.Time      // time of the earliest event (zero without events)
	Last       time.Time      // time of the latest event
	MaxToken   uint64         // largest token granted
	StillHeld  []Holding      // holders without a release at the end, by lock name
	Violations []Violation    // in line order, the first MaxListed
	// ViolationCount counts every violation, also those beyond MaxListed.
	ViolationCount int
	BadLines       []LineError // lines that are not audit events, the first MaxListed
	// BadLineCount counts every bad line, also those beyond MaxListed.
	BadLineCount int
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

// OK reports whether the history has no violations. Bad lines are reported
// apart (BadLineCount): what they held was not checked.
func (r Report) OK() bool { return r.ViolationCount == 0 }

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
	fmt.Fprintf(&b, "most held:  %d locks at the same time\n", r.MaxHeld)
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
	if r.BadLineCount > 0 {
		fmt.Fprintf(&b, "bad lines:  %d (not audit events, not checked)\n", r.BadLineCount)
		for _, e := range r.BadLines {
			fmt.Fprintf(&b, "  %v\n", &e)
		}
		if more := r.BadLineCount - len(r.BadLines); more > 0 {
			fmt.Fprintf(&b, "  ... and %d more\n", more)
		}
	}
	if r.OK() {
		b.WriteString("violations: none\n")
		return b.String()
	}
	fmt.Fprintf(&b, "violations: %d\n", r.ViolationCount)
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "  %s\n", v)
	}
	if more := r.ViolationCount - len(r.Violations); more > 0 {
		fmt.Fprintf(&b, "  ... and %d more\n", more)
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
	Reason     string  `json:"reason"`
	Operator   string  `json:"operator"` // force_release, kick_waiter
}

// lockState is one held lock's holder while Check reads. A lock that is not
// held has no entry: the checker's memory grows with the locks held at the
// same time, not with every name the file mentions.
type lockState struct {
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
// Tokens come from one sequence for all locks of a server process, and a
// successor process starts above its predecessor, so the increase is checked
// over the whole stream, against the last grant, whatever its lock: a token
// that went backwards on one lock went backwards globally. That needs one
// number, not a token per lock name.
//
// Unknown events and fields are ignored; blank lines are skipped. Holders
// without a release at the end are listed as still held, not as violations.
// A line that is not an audit event (not JSON, a known event without its
// fields, longer than MaxLineLen) is listed in BadLines and skipped; the
// check goes on with the next line. Only a read error ends it early, with the
// report up to there.
func Check(r io.Reader) (Report, error) {
	rep := Report{Events: map[string]int{}}
	locks := map[string]lockState{}
	var lastToken uint64
	lastTokenLine := 0
	lr := newLineReader(r)
	for {
		n, ev, at, bad, err := lr.next()
		if err != nil {
			rep.finish(locks)
			if err == io.EOF {
				return rep, nil
			}
			return rep, err
		}
		if bad != nil {
			rep.badLine(n, bad)
			continue
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
		st, held := locks[name]
		violation := func(format string, args ...any) {
			rep.ViolationCount++
			if len(rep.Violations) < MaxListed {
				rep.Violations = append(rep.Violations, Violation{Line: n, Lock: name, What: fmt.Sprintf(format, args...)})
			}
		}
		// holderToken checks that a release or a force_release (what says
		// which, in the violation's text) names the current holder's token.
		holderToken := func(what string, token uint64) {
			switch {
			case !held:
				violation("%s %d without a holder", what, token)
			case token != st.token:
				violation("%s %d, but the holder has token %d (granted on line %d)", what, token, st.token, st.line)
			}
		}
		switch *ev.Event {
		case audit.EventGranted:
			token := *ev.Token
			if held {
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
			locks[name] = lockState{token: token, remoteAddr: ev.RemoteAddr, line: n}
			rep.MaxHeld = max(rep.MaxHeld, len(locks))
		case audit.EventReleased:
			holderToken("released token", *ev.Token)
			delete(locks, name)
		case audit.EventForceRelease:
			holderToken("force_release of token", *ev.Token)
			// The holder's released event follows.
		}
	}
}

// lineReader reads an audit stream one line at a time into one buffer.
type lineReader struct {
	br  *bufio.Reader
	buf []byte
	n   int // lines read
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 64<<10)}
}

// next returns the next line that is not blank: its number and its event,
// or in bad why it is not an audit event. err is io.EOF at the end, or the
// read error.
func (lr *lineReader) next() (n int, ev line, at time.Time, bad error, err error) {
	for {
		raw, tooLong, err := readLine(lr.br, &lr.buf)
		if err != nil {
			return lr.n, ev, at, nil, err
		}
		lr.n++
		if tooLong {
			return lr.n, ev, at, fmt.Errorf("line longer than %d bytes", MaxLineLen), nil
		}
		if raw = bytes.TrimSpace(raw); len(raw) == 0 {
			continue
		}
		ev, at, bad = parseLine(raw)
		return lr.n, ev, at, bad, nil
	}
}

// readLine returns the next line without its end, reusing *buf. A line longer
// than MaxLineLen is read to its end and dropped (tooLong), so that one bad
// line costs no more memory than MaxLineLen. A last line without a newline
// counts; io.EOF comes only when nothing is left.
func readLine(br *bufio.Reader, buf *[]byte) (line []byte, tooLong bool, err error) {
	*buf = (*buf)[:0]
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(*buf)+len(chunk) > MaxLineLen+1 {
				tooLong, *buf = true, (*buf)[:0]
			} else {
				*buf = append(*buf, chunk...)
			}
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF && (len(*buf) > 0 || tooLong):
			return *buf, tooLong, nil
		case err != nil:
			return nil, false, err
		}
		return bytes.TrimSuffix(*buf, []byte("\n")), tooLong, nil
	}
}

// badLine records a line that is not an audit event.
func (rep *Report) badLine(n int, err error) {
	rep.BadLineCount++
	if len(rep.BadLines) < MaxListed {
		rep.BadLines = append(rep.BadLines, LineError{Line: n, Err: err})
	}
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
func (rep *Report) finish(locks map[string]lockState) {
	rep.StillHeld = nil
	for name, st := range locks {
		rep.StillHeld = append(rep.StillHeld, Holding{Lock: name, Token: st.token, RemoteAddr: st.remoteAddr, Line: st.line})
	}
	slices.SortFunc(rep.StillHeld, func(a, b Holding) int { return strings.Compare(a.Lock, b.Lock) })
}
