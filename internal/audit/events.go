package audit

import (
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
// one time buffer and is not safe for concurrent use.
type Recorder struct {
	enc     zerolog.Logger
	timeBuf []byte
}

// NewRecorder returns a Recorder writing to log.
func NewRecorder(log *Log) *Recorder {
	return &Recorder{enc: zerolog.New(log), timeBuf: make([]byte, 0, len(time.RFC3339Nano))}
}

// event starts one line: the time, the event's name and whom it concerns
// (identity is "" without mutual TLS).
func (r *Recorder) event(now time.Time, name, lock, identity, remote string) *zerolog.Event {
	r.timeBuf = now.UTC().AppendFormat(r.timeBuf[:0], time.RFC3339Nano)
	return r.enc.Log().
		Bytes("time", r.timeBuf).
		Str("event", name).
		Str("lock", lock).
		Str("identity", identity).
		Str("remote_addr", remote)
}

// Granted records a grant: to a free lock or by promotion.
func (r *Recorder) Granted(now time.Time, lock, identity, remote string, token uint64, wait time.Duration) {
	r.event(now, EventGranted, lock, identity, remote).Uint64("token", token).Int64("wait_ms", wait.Milliseconds()).Send()
}

// Released records the end of a hold, with the reason.
func (r *Recorder) Released(now time.Time, lock, identity, remote string, token uint64, held time.Duration, reason string) {
	r.event(now, EventReleased, lock, identity, remote).Uint64("token", token).Int64("held_ms", held.Milliseconds()).Str("reason", reason).Send()
}

// Denied records an ACQUIRE the ACL refused.
func (r *Recorder) Denied(now time.Time, lock, identity, remote string) {
	r.event(now, EventDenied, lock, identity, remote).Send()
}

// ForceRelease records an administrator taking a lock from its holder.
func (r *Recorder) ForceRelease(now time.Time, lock, identity, remote string, token uint64) {
	r.event(now, EventForceRelease, lock, identity, remote).Uint64("token", token).Send()
}

// KickWaiter records an administrator removing a waiter from a queue.
func (r *Recorder) KickWaiter(now time.Time, lock, identity, remote string) {
	r.event(now, EventKickWaiter, lock, identity, remote).Send()
}
