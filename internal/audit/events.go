package audit

import (
	"net"
	"net/netip"
	"time"

	"github.com/rs/zerolog"
)

// Event names.
const (
	EventGranted      = "granted"
	EventReleased     = "released"
	EventDenied       = "denied"
	EventForceRelease = "force_release"
	EventKickWaiter   = "kick_waiter"
)

// Recorder encodes events onto a Log. It belongs to the owner loop: it reuses
// its time and address buffers and is not safe for concurrent use. Recording
// an event allocates nothing: it runs on every grant and release.
type Recorder struct {
	enc     zerolog.Logger
	timeBuf []byte
	addrBuf []byte
}

// NewRecorder returns a Recorder writing to log.
func NewRecorder(log *Log) *Recorder {
	return &Recorder{
		enc:     zerolog.New(log),
		timeBuf: make([]byte, 0, len(time.RFC3339Nano)),
		addrBuf: make([]byte, 0, len("[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535")),
	}
}

// event starts one line: the time, the event's name and whom it concerns
// (identity is "" without mutual TLS).
func (r *Recorder) event(now time.Time, name, lock, identity string, remote net.Addr) *zerolog.Event {
	r.timeBuf = now.UTC().AppendFormat(r.timeBuf[:0], time.RFC3339Nano)
	r.addrBuf = appendAddr(r.addrBuf[:0], remote)
	return r.enc.Log().
		Bytes("time", r.timeBuf).
		Str("event", name).
		Str("lock", lock).
		Str("identity", identity).
		Bytes("remote_addr", r.addrBuf)
}

// appendAddr appends addr as addr.String() writes it, without String's
// allocations for the TCP addresses sessions have. An IPv4 client of a
// dual-stack listener is written as IPv4, as String does.
func appendAddr(b []byte, addr net.Addr) []byte {
	if tcp, ok := addr.(*net.TCPAddr); ok && tcp != nil {
		if ap := tcp.AddrPort(); ap.Addr().IsValid() {
			return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).AppendTo(b)
		}
	}
	if addr == nil {
		return b
	}
	return append(b, addr.String()...)
}

// Granted records a grant: to a free lock or by promotion.
func (r *Recorder) Granted(now time.Time, lock, identity string, remote net.Addr, token uint64, wait time.Duration) {
	r.event(now, EventGranted, lock, identity, remote).Uint64("token", token).Int64("wait_ms", wait.Milliseconds()).Send()
}

// Released records the end of a hold, with the reason.
func (r *Recorder) Released(now time.Time, lock, identity string, remote net.Addr, token uint64, held time.Duration, reason string) {
	r.event(now, EventReleased, lock, identity, remote).Uint64("token", token).Int64("held_ms", held.Milliseconds()).Str("reason", reason).Send()
}

// Denied records an ACQUIRE the ACL refused.
func (r *Recorder) Denied(now time.Time, lock, identity string, remote net.Addr) {
	r.event(now, EventDenied, lock, identity, remote).Send()
}

// ForceRelease records an administrator taking a lock from its holder:
// identity and remote are the holder's, operator the administrator's
// identity ("" without mutual TLS on the admin port).
func (r *Recorder) ForceRelease(now time.Time, lock, identity string, remote net.Addr, token uint64, operator string) {
	r.event(now, EventForceRelease, lock, identity, remote).Uint64("token", token).Str("operator", operator).Send()
}

// KickWaiter records an administrator removing a waiter from a queue, as
// ForceRelease does.
func (r *Recorder) KickWaiter(now time.Time, lock, identity string, remote net.Addr, operator string) {
	r.event(now, EventKickWaiter, lock, identity, remote).Str("operator", operator).Send()
}
