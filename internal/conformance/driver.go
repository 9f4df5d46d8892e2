// Package conformance is the conformance kit: it plays the server's side of
// scripted scenarios over real sockets, starts a client's driver (a small
// program that calls the client's public API and prints what it reported, one
// JSON object a line) and judges the client from the wire and from those
// events. docs/conformance.md is the driver contract and the list of
// scenarios with their rules and tolerances.
package conformance

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/monolock/monolock/internal/testsupport/proc"
)

// Driver is one client's driver command.
type Driver struct {
	Name string   // "go", "python"
	Argv []string // the command and its arguments
	// Supports lists the optional parts of the contract the driver
	// implements (FeatureAddresses); a scenario that needs one the judged
	// driver lacks is skipped as not supported, never failed.
	Supports []string
}

// FeatureAddresses: the driver gives the client every address of the
// request's "addresses" (docs/conformance.md).
const FeatureAddresses = "addresses"

// Supported reports whether the driver implements feature.
func (d Driver) Supported(feature string) bool { return slices.Contains(d.Supports, feature) }

// ParseDriver reads NAME=COMMAND, the command split at spaces.
func ParseDriver(s string) (Driver, error) {
	name, cmd, ok := strings.Cut(s, "=")
	argv := strings.Fields(cmd)
	if !ok || name == "" || len(argv) == 0 {
		return Driver{}, fmt.Errorf("driver %q: want NAME=COMMAND, for example go=bin/godriver", s)
	}
	return Driver{Name: name, Argv: argv}, nil
}

// Request is the first line the driver reads (docs/conformance.md).
type Request struct {
	Address string `json:"address"`
	// Addresses, when set, are every address the client is given, Address
	// being the first (for a driver that knows only "address").
	Addresses  []string `json:"addresses,omitempty"`
	Name       *string  `json:"name,omitempty"`
	NameHex    string   `json:"name_hex"`
	LeaseUS    int64    `json:"lease_us"`
	WaitMS     int64    `json:"wait_ms"`
	Mode       string   `json:"mode"`
	WorkStopMS int64    `json:"work_stop_ms"`
	// TLS, when set, says to connect with TLS; absent for plain TCP.
	TLS *TLSFiles `json:"tls,omitempty"`
}

// TLSFiles is the request's "tls" object: PEM files the driver gives the
// client's own TLS configuration.
type TLSFiles struct {
	// CAFile is the CA certificate to verify the server with.
	CAFile string `json:"ca_file"`
	// ServerName is the name to verify in the server's certificate.
	ServerName string `json:"server_name"`
	// CertFile and KeyFile are the client certificate and its PKCS #8 key,
	// for mutual TLS; absent when the client presents none.
	CertFile string `json:"cert_file,omitempty"`
	KeyFile  string `json:"key_file,omitempty"`
}

// Wait modes and modes of a Request.
const (
	WaitForever = -1
	WaitNo      = 0

	ModeAcquire = "acquire"
	ModeRun     = "run"

	// WorkNeverStops is WorkStopMS for work that stops only when released.
	WorkNeverStops = -1
)

// NewRequest is a request in acquire mode that waits forever and whose work
// stops at once after a loss.
func NewRequest(addr, name string, lease time.Duration) Request {
	r := Request{Address: addr, LeaseUS: lease.Microseconds(), WaitMS: WaitForever, Mode: ModeAcquire}
	r.SetName([]byte(name))
	return r
}

// SetName sets name_hex, and name when the bytes are valid UTF-8.
func (r *Request) SetName(b []byte) {
	r.NameHex = hex.EncodeToString(b)
	r.Name = nil
	if utf8.Valid(b) {
		s := string(b)
		r.Name = &s
	}
}

// Event is one line the driver printed, with its time: when the client
// decided it when the driver stamped it with mono_ns, else when the kit read
// the line.
type Event struct {
	Event     string `json:"event"`
	Token     string `json:"token,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Code      *int   `json:"code,omitempty"`
	Retriable *bool  `json:"retriable,omitempty"`
	// MonoNS is the CLOCK_MONOTONIC reading, in nanoseconds, at which the
	// client decided the event, when the driver knows it. Linux has one such
	// clock for every process, so the kit can place it on its own timeline:
	// a starved runtime may print a line long after its client decided.
	MonoNS *int64 `json:"mono_ns,omitempty"`

	At   time.Time `json:"-"`
	Line string    `json:"-"`
}

func (e Event) String() string { return e.Line }

// Process is a running driver: a child that speaks in lines
// (internal/testsupport/proc), whose lines are events.
type Process struct {
	label string
	child *proc.Child

	// sentMono is the kit's CLOCK_MONOTONIC just before it sent the request:
	// no event can have been decided earlier.
	sentMono int64

	mu  sync.Mutex
	bad []string // lines that are not events
}

// Start runs the driver and sends it req.
func Start(d Driver, label string, req Request) (*Process, error) {
	child, err := proc.StartChild(d.Argv[0], proc.ChildOptions{
		Name: "driver " + label, Args: d.Argv[1:], Env: []string{"MONOLOCK_CONFORMANCE=1"},
	})
	if err != nil {
		return nil, fmt.Errorf("start driver %s (%s): %w", d.Name, strings.Join(d.Argv, " "), err)
	}
	p := &Process{label: label, child: child}
	if p.sentMono, err = monotonicNow(); err != nil {
		p.Close()
		return nil, err
	}
	line, _ := json.Marshal(req)
	if err := child.Send(string(line)); err != nil {
		p.Close()
		return nil, fmt.Errorf("driver %s: send the request: %w", d.Name, err)
	}
	return p, nil
}

// Next returns the driver's next event, or an error when none came within
// timeout or the driver exited. Lines that are not events are kept for
// Diagnostics and do not count.
func (p *Process) Next(timeout time.Duration) (Event, error) {
	deadline := time.Now().Add(timeout)
	for {
		l, err := p.child.Next(max(time.Until(deadline), 0))
		if err != nil {
			return Event{}, err // it names the driver
		}
		ev := Event{At: l.At, Line: l.Text}
		if err := json.Unmarshal([]byte(l.Text), &ev); err != nil || ev.Event == "" {
			p.mu.Lock()
			p.bad = append(p.bad, l.Text)
			p.mu.Unlock()
			continue
		}
		if ev.MonoNS != nil {
			now, err := monotonicNow()
			if err != nil {
				return ev, err
			}
			at, err := decidedAt(*ev.MonoNS, p.sentMono, now, time.Now())
			if err != nil {
				return ev, fmt.Errorf("driver %s printed %s: %w", p.label, l.Text, err)
			}
			ev.At = at
		}
		return ev, nil
	}
}

// decidedAt places mono, a CLOCK_MONOTONIC reading of the driver's, on the
// kit's timeline: wallNow less how long ago mono was (monoNow − mono). The
// result keeps wallNow's monotonic reading, so it compares with the kit's
// other times as they do with each other. A reading the kit has not reached
// yet, or one from before the kit sent the request (sentMono), is not a time
// the client can have decided anything at.
func decidedAt(mono, sentMono, monoNow int64, wallNow time.Time) (time.Time, error) {
	if mono > monoNow {
		return time.Time{}, fmt.Errorf("mono_ns is %v in the kit's future: it must be the CLOCK_MONOTONIC reading (in nanoseconds) taken when the client decided the event", time.Duration(mono-monoNow))
	}
	if mono < sentMono {
		return time.Time{}, fmt.Errorf("mono_ns is %v before the kit sent the request: it must be the CLOCK_MONOTONIC reading (in nanoseconds) taken when the client decided the event", time.Duration(sentMono-mono))
	}
	return wallNow.Add(-time.Duration(monoNow - mono)), nil
}

// monotonicNow is CLOCK_MONOTONIC in nanoseconds, the clock drivers stamp
// events with (Go's own monotonic readings are not comparable across
// processes).
func monotonicNow() (int64, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0, fmt.Errorf("conformance: read CLOCK_MONOTONIC to time the driver's events: %w", err)
	}
	return ts.Nano(), nil
}

// Expect returns the next event, which must be of kind.
func (p *Process) Expect(kind string, timeout time.Duration) (Event, error) {
	ev, err := p.Next(timeout)
	if err != nil {
		return ev, fmt.Errorf("waiting for %q: %w", kind, err)
	}
	if ev.Event != kind {
		return ev, fmt.Errorf("driver %s printed %s, want a %q event", p.label, ev.Line, kind)
	}
	return ev, nil
}

// Quiet reports an event printed within d, if any.
func (p *Process) Quiet(d time.Duration) (Event, bool) {
	ev, err := p.Next(d)
	return ev, err == nil
}

// Release sends {"cmd":"release"}.
func (p *Process) Release() error { return p.child.Send(`{"cmd":"release"}`) }

// Close ends the driver's input, gives it a few seconds to exit and kills its
// process group if it does not.
func (p *Process) Close() { _ = p.child.Close(5 * time.Second) }

// Diagnostics is the driver's stderr and any line it printed that was not an
// event, for a failure message.
func (p *Process) Diagnostics() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	if len(p.bad) > 0 {
		fmt.Fprintf(&b, "driver %s printed lines that are not events: %q\n", p.label, p.bad)
	}
	if s := strings.TrimSpace(p.child.Stderr()); s != "" {
		fmt.Fprintf(&b, "driver %s stderr:\n%s\n", p.label, s)
	}
	return b.String()
}
