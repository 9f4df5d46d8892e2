// Package wire is the raw protocol client of the tests: bytes out, frames in,
// nothing hidden. Unlike package client it never retries, reconnects or
// heartbeats on its own, and it sends whatever bytes a test gives it, valid
// frames or not, over any net.Conn (plain TCP, TLS, a pipe, a proxy).
//
// Every read and write has a deadline, Conn.Safety (DefaultSafety unless
// set). The deadline is a net against a hung test, never a timing assertion:
// the awaited frame normally comes in microseconds.
//
// Methods come in two kinds. Those ending in Err return an error and may be
// used from any goroutine. The others report a failure to the testing.TB
// the connection was bound to (MustDial, Bind) with Fatalf, so they belong
// to the test's own goroutine; on an unbound Conn they panic.
package wire

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/monolock/monolock/protocol"
)

// DefaultSafety bounds a read or write when Conn.Safety is zero.
const DefaultSafety = 10 * time.Second

// Conn is a raw protocol connection.
type Conn struct {
	// NC is the connection itself, for what the helpers do not cover
	// (half-closes, linger, TLS state, bufio readers).
	NC net.Conn
	// Label names the connection in failure messages ("holder", "waiter 3").
	Label string
	// Safety bounds each read and write; DefaultSafety when zero.
	Safety time.Duration

	t   testing.TB
	buf protocol.FrameBuffer
}

// Options say how Dial connects.
type Options struct {
	TLS    *tls.Config   // nil: plain TCP
	Label  string        // Conn.Label; the local address when empty
	Safety time.Duration // Conn.Safety, also the connect and handshake timeout
	// From is the local address to connect from, "" for the system's
	// choice: another loopback address (127.0.0.0/8) stands for another
	// client host, as the server's per-source rules see it.
	From string
}

// Dialer returns the dialer o describes, with timeout.
func (o Options) Dialer(timeout time.Duration) (*net.Dialer, error) {
	d := &net.Dialer{Timeout: timeout}
	if o.From != "" {
		ip := net.ParseIP(o.From)
		if ip == nil {
			return nil, fmt.Errorf("dial from %q: not an IP address", o.From)
		}
		d.LocalAddr = &net.TCPAddr{IP: ip}
		d.Control = bindAddressNoPort
	}
	return d, nil
}

// bindAddressNoPort leaves the choice of the local port to connect, which
// picks one free for this destination, instead of to bind, which picks one
// free for every destination: an attacker of 20,000 connections from one
// address, dialling again after an earlier attack's connections left their
// ports in TIME_WAIT, would otherwise run out ("bind: address already in
// use") long before the ephemeral range does.
func bindAddressNoPort(_, _ string, c syscall.RawConn) error {
	var err error
	if cerr := c.Control(func(fd uintptr) {
		err = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1)
	}); cerr != nil {
		return cerr
	}
	if err != nil {
		return fmt.Errorf("IP_BIND_ADDRESS_NO_PORT: %w", err)
	}
	return nil
}

// New wraps an open connection.
func New(nc net.Conn, label string) *Conn {
	return &Conn{NC: nc, Label: label}
}

// Dial connects to addr, over TLS (the handshake done) when o.TLS is set.
// Plain connections have TCP_NODELAY set explicitly: the byte-by-byte tests
// rely on each write leaving as its own segment. The caller closes the
// connection.
func Dial(addr string, o Options) (*Conn, error) {
	safety := o.Safety
	if safety <= 0 {
		safety = DefaultSafety
	}
	d, err := o.Dialer(safety)
	if err != nil {
		return nil, err
	}
	var nc net.Conn
	if o.TLS != nil {
		nc, err = tls.DialWithDialer(d, "tcp", addr, o.TLS)
	} else {
		nc, err = d.Dial("tcp", addr)
		if err == nil {
			if err = nc.(*net.TCPConn).SetNoDelay(true); err != nil {
				_ = nc.Close()
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	label := o.Label
	if label == "" {
		label = nc.LocalAddr().String()
	}
	return &Conn{NC: nc, Label: label, Safety: o.Safety}, nil
}

// MustDial is Dial bound to t: a failure ends the test, and the connection
// is closed when the test ends.
func MustDial(t testing.TB, addr string, o Options) *Conn {
	t.Helper()
	c, err := Dial(addr, o)
	if err != nil {
		label := o.Label
		if label == "" {
			label = "client"
		}
		t.Fatalf("%s: %v", label, err)
	}
	return c.Bind(t)
}

// Holder dials addr (MustDial), sends ACQUIRE for the free lock name and
// reads its ACQUIRED; it returns the connection and the token.
func Holder(t testing.TB, addr string, o Options, name string, leaseMS uint32) (*Conn, uint64) {
	t.Helper()
	c := MustDial(t, addr, o)
	c.SendAcquire(name, leaseMS)
	return c, c.ExpectAcquired()
}

// Waiter dials addr (MustDial), sends ACQUIRE for the held lock name and
// reads its WAITING: the connection is in the queue.
func Waiter(t testing.TB, addr string, o Options, name string, leaseMS uint32) *Conn {
	t.Helper()
	c := MustDial(t, addr, o)
	c.SendAcquire(name, leaseMS)
	c.ExpectWaiting()
	return c
}

// LocalAddr is the connection's address as the server sees it (the
// remote_addr of the admin API and the audit log).
func (c *Conn) LocalAddr() string { return c.NC.LocalAddr().String() }

// Bind makes t the test the connection reports to, and closes the
// connection when t ends.
func (c *Conn) Bind(t testing.TB) *Conn {
	c.t = t
	t.Cleanup(func() { _ = c.NC.Close() })
	return c
}

func (c *Conn) safety() time.Duration {
	if c.Safety > 0 {
		return c.Safety
	}
	return DefaultSafety
}

// T is the test the connection is bound to, for a test's own checks on
// it; on an unbound connection its Fatal methods panic.
func (c *Conn) T() testing.TB { return c.tb() }

// tb is the bound test, or unbound.
func (c *Conn) tb() testing.TB {
	if c.t == nil {
		return unbound{}
	}
	return c.t
}

// fatalf reports to the bound test.
func (c *Conn) fatalf(format string, args ...any) {
	t := c.tb()
	t.Helper()
	t.Fatal(c.Label + ": " + fmt.Sprintf(format, args...))
}

// unbound stands in for the test of a Conn bound to none: a failure panics.
type unbound struct{ testing.TB }

func (unbound) Helper() {}

func (unbound) Fatal(args ...any) {
	panic(fmt.Sprint(args...) + " (wire: the connection is bound to no test; use the Err methods)")
}

// --- frames to send ---

// Acquire is a valid ACQUIRE frame.
func Acquire(name string, leaseMS uint32) []byte {
	return protocol.AppendAcquire(nil, leaseMS, name)
}

// RawAcquire is an ACQUIRE with every field chosen by the caller, valid or
// not; name is appended as is whatever nameLen says.
func RawAcquire(version uint8, leaseMS uint32, nameLen uint16, name []byte) []byte {
	b := []byte{byte(protocol.TypeAcquire), version}
	b = binary.BigEndian.AppendUint32(b, leaseMS)
	b = binary.BigEndian.AppendUint16(b, nameLen)
	return append(b, name...)
}

// Heartbeat is the HEARTBEAT frame. Do not modify it.
var Heartbeat = []byte{byte(protocol.TypeHeartbeat)}

// Release is the RELEASE frame. Do not modify it.
var Release = []byte{byte(protocol.TypeRelease)}

// --- frames received ---

// Frame is a decoded server frame, its reason copied out of the read buffer.
type Frame struct {
	Type   protocol.Type
	Token  uint64
	Code   protocol.Code
	Reason string
}

func (f Frame) String() string {
	switch f.Type {
	case protocol.TypeWaiting:
		return "WAITING"
	case protocol.TypeAcquired:
		return fmt.Sprintf("ACQUIRED(%d)", f.Token)
	case protocol.TypeError:
		return fmt.Sprintf("ERROR(0x%02x %q)", uint8(f.Code), f.Reason)
	case 0:
		return "nothing"
	}
	return fmt.Sprintf("frame(0x%02x)", uint8(f.Type))
}

// typeName names a frame type.
func typeName(t protocol.Type) string {
	switch t {
	case protocol.TypeWaiting:
		return "WAITING"
	case protocol.TypeAcquired:
		return "ACQUIRED"
	case protocol.TypeError:
		return "ERROR"
	}
	return fmt.Sprintf("frame(0x%02x)", uint8(t))
}

// CheckReason enforces protocol.md on an ERROR's reason: valid UTF-8 and,
// when not empty, starting with the code's canonical text.
func CheckReason(f Frame) error {
	if !utf8.ValidString(f.Reason) {
		return fmt.Errorf("ERROR 0x%02x reason %q is not valid UTF-8", uint8(f.Code), f.Reason)
	}
	if f.Reason != "" && !strings.HasPrefix(f.Reason, f.Code.String()) {
		return fmt.Errorf("ERROR 0x%02x reason %q does not start with the canonical text %q", uint8(f.Code), f.Reason, f.Code.String())
	}
	return nil
}

// --- error-returning methods, for any goroutine ---

// SendErr writes b within the safety deadline.
func (c *Conn) SendErr(b []byte) error {
	if err := c.NC.SetWriteDeadline(time.Now().Add(c.safety())); err != nil {
		return err
	}
	_, err := c.NC.Write(b)
	return err
}

// ReadErr reads one server frame, waiting at most timeout (the safety
// deadline when timeout is zero).
func (c *Conn) ReadErr(timeout time.Duration) (Frame, error) {
	if timeout <= 0 {
		timeout = c.safety()
	}
	return c.ReadUntilErr(time.Now().Add(timeout))
}

// ReadUntilErr reads one server frame that must arrive before deadline (for
// tests whose deadline is an assertion, such as an answer within a lease).
func (c *Conn) ReadUntilErr(deadline time.Time) (Frame, error) {
	if err := c.NC.SetReadDeadline(deadline); err != nil {
		return Frame{}, err
	}
	var f protocol.Frame
	if err := protocol.ReadServerFrame(c.NC, &c.buf, &f); err != nil {
		return Frame{}, err
	}
	return Frame{Type: f.Type, Token: f.Token, Code: f.Code, Reason: string(f.Reason)}, nil
}

// RequestErr writes b and reads the one frame that answers it.
func (c *Conn) RequestErr(b []byte) (Frame, error) {
	if err := c.SendErr(b); err != nil {
		return Frame{}, err
	}
	return c.ReadErr(0)
}

// ExpectErr reads a frame of type typ.
func (c *Conn) ExpectErr(typ protocol.Type) (Frame, error) {
	f, err := c.ReadErr(0)
	if err != nil {
		return f, fmt.Errorf("reading a frame: %w", err)
	}
	if f.Type != typ {
		return f, fmt.Errorf("got %v, want %s", f, typeName(typ))
	}
	return f, nil
}

// EOFErr reads the server's close: no frame, then EOF.
func (c *Conn) EOFErr() error {
	f, err := c.ReadErr(0)
	switch {
	case err == nil:
		return fmt.Errorf("got %v, want the connection closed (EOF)", f)
	case errors.Is(err, io.EOF):
		return nil
	default:
		return fmt.Errorf("want EOF, got %w", err)
	}
}

// --- methods that fail the bound test ---

// Send writes b.
func (c *Conn) Send(b []byte) {
	c.tb().Helper()
	if err := c.SendErr(b); err != nil {
		c.fatalf("write %x: %v", b, err)
	}
}

// SendAcquire writes a valid ACQUIRE.
func (c *Conn) SendAcquire(name string, leaseMS uint32) {
	c.tb().Helper()
	c.Send(Acquire(name, leaseMS))
}

// SendHeartbeat writes a HEARTBEAT.
func (c *Conn) SendHeartbeat() {
	c.tb().Helper()
	c.Send(Heartbeat)
}

// SendRelease writes a RELEASE.
func (c *Conn) SendRelease() {
	c.tb().Helper()
	c.Send(Release)
}

// SendBytewise writes b one byte per write, pausing between writes so that
// each byte reaches the server as its own segment (TCP_NODELAY is on).
func (c *Conn) SendBytewise(b []byte, pause time.Duration) {
	c.tb().Helper()
	for i := range b {
		c.Send(b[i : i+1])
		time.Sleep(pause)
	}
}

// ReadFrame reads one server frame.
func (c *Conn) ReadFrame() Frame {
	c.tb().Helper()
	f, err := c.ReadErr(0)
	if err != nil {
		c.fatalf("reading a frame: %v", err)
	}
	return f
}

// Expect reads a frame of type typ.
func (c *Conn) Expect(typ protocol.Type) Frame {
	c.tb().Helper()
	f, err := c.ExpectErr(typ)
	if err != nil {
		c.fatalf("%v", err)
	}
	return f
}

// ExpectWaiting reads a WAITING.
func (c *Conn) ExpectWaiting() {
	c.tb().Helper()
	c.Expect(protocol.TypeWaiting)
}

// ExpectAcquired reads an ACQUIRED and returns its token.
func (c *Conn) ExpectAcquired() uint64 {
	c.tb().Helper()
	return c.Expect(protocol.TypeAcquired).Token
}

// ExpectToken reads an ACQUIRED carrying exactly tok.
func (c *Conn) ExpectToken(tok uint64) {
	c.tb().Helper()
	if got := c.ExpectAcquired(); got != tok {
		c.fatalf("ACQUIRED(%d), want the session's token %d", got, tok)
	}
}

// ExpectCode reads an ERROR with the given code, whatever its reason.
func (c *Conn) ExpectCode(code protocol.Code) Frame {
	c.tb().Helper()
	f := c.ReadFrame()
	if f.Type != protocol.TypeError || f.Code != code {
		c.fatalf("got %v, want ERROR 0x%02x (%v)", f, uint8(code), code)
	}
	return f
}

// ExpectError reads an ERROR with the given code and returns its reason,
// which must obey CheckReason.
func (c *Conn) ExpectError(code protocol.Code) string {
	c.tb().Helper()
	f := c.ExpectCode(code)
	if err := CheckReason(f); err != nil {
		c.fatalf("%v", err)
	}
	return f.Reason
}

// ExpectCodeThenEOF reads an ERROR with the given code, whatever its
// reason, and then the server's close.
func (c *Conn) ExpectCodeThenEOF(code protocol.Code) Frame {
	c.tb().Helper()
	f := c.ExpectCode(code)
	c.ExpectEOF()
	return f
}

// ExpectEOF reads the server's close: no frame, then EOF.
func (c *Conn) ExpectEOF() {
	c.tb().Helper()
	if err := c.EOFErr(); err != nil {
		c.fatalf("%v", err)
	}
}

// ExpectErrorThenEOF reads the ERROR and then the server's close.
func (c *Conn) ExpectErrorThenEOF(code protocol.Code) string {
	c.tb().Helper()
	reason := c.ExpectError(code)
	c.ExpectEOF()
	return reason
}

// Close closes the connection.
func (c *Conn) Close() {
	c.tb().Helper()
	if err := c.NC.Close(); err != nil {
		c.fatalf("close: %v", err)
	}
}
