package tlsconn

import (
	"errors"
	"time"
)

// Bounds on what a TLS session may make the loop do beyond its application
// data. crypto/tls answers post-handshake messages (a KeyUpdate costs a key
// derivation, about 12 µs) and empty records inside Read, and resets its own
// limit on them at every application byte, so the session counts ciphertext
// and records itself:
//
//   - one turn decrypts at most Config.TurnBytes of ciphertext (not
//     plaintext), however small the records;
//   - records that yield no application data (KeyUpdates, empty records) are
//     rate-limited per session: controlBurst at once, then one per
//     controlInterval. Clients update keys rarely (after gigabytes, or when
//     asked); a session over the rate is closed;
//   - between two pieces of application data, at most maxControlBytes of
//     ciphertext: a handshake message the client starts and never finishes
//     (it may declare 64 KiB) holds no more than that, and once more of it
//     than whole KeyUpdates is waiting, the half-frame io-timeout runs
//     (HalfRecord).
const (
	controlBurst    = 8
	controlInterval = 10 * time.Second
	maxControlBytes = 4 << 10
	// keyUpdateRecord is the ciphertext of one TLS 1.3 KeyUpdate: record
	// header, the 4-byte message header and its one byte, the inner content
	// type, and the AEAD tag.
	keyUpdateRecord = RecordHeaderLen + 4 + 1 + 1 + 16
)

var (
	errControlRate  = errors.New("the client sent KeyUpdates or empty records faster than any client needs; closing the session")
	errControlBytes = errors.New("the client sent more post-handshake handshake data than the server accepts; closing the session")
)

// controlRate is a generic cell rate limiter: tat is when the records spent so
// far would have been paid off at one per controlInterval.
type controlRate struct {
	tat time.Duration
}

// spend accounts for n control records at now; false when that exceeds the
// rate.
func (r *controlRate) spend(n int, now time.Duration) bool {
	r.tat = max(r.tat, now) + time.Duration(n)*controlInterval
	return r.tat-now <= controlBurst*controlInterval
}

// withinBounds is checked before every read of the session's ciphertext.
func (t *transport) withinBounds() error {
	if t.handed-t.appAt > maxControlBytes {
		return errControlBytes
	}
	if t.handed-t.turnStart >= t.turnBytes {
		t.throttled = true
		return errNoInput
	}
	return nil
}

// HalfRecord reports whether the session holds input that is not a whole
// record yet, or a handshake message that may be half-sent: the half-frame
// io-timeout runs for it as for a half-sent frame.
func (c *Conn) HalfRecord() bool {
	if !c.tr.throttled && !c.tr.drained() {
		return true
	}
	return c.tr.handed-c.tr.appAt > (c.tr.records-c.tr.appRecords)*keyUpdateRecord
}

// opened starts the session's counts when its handshake is done: the
// handshake's own records count toward none of its bounds.
func (t *transport) opened() {
	t.handed, t.records, t.turnStart, t.appAt, t.appRecords = 0, 0, 0, 0, 0
}
