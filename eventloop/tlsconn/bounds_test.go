package tlsconn

import (
	"testing"
	"time"
)

// The control-record rate: controlBurst at once, then one per
// controlInterval; idle time refills the burst and no more.
func TestControlRate(t *testing.T) {
	var r controlRate
	now := time.Hour
	for i := range controlBurst {
		if !r.spend(1, now) {
			t.Fatalf("record %d of the burst refused", i+1)
		}
	}
	if r.spend(1, now) {
		t.Fatal("one record over the burst allowed")
	}
	r = controlRate{}
	if !r.spend(controlBurst, now) || r.spend(1, now+controlInterval-1) {
		t.Fatal("a whole burst at once, then one more before an interval passed")
	}
	if !r.spend(1, now+2*controlInterval) {
		t.Fatal("one record an interval later refused")
	}
	// A long quiet spell buys the burst again, not more.
	now += 100 * controlInterval
	if !r.spend(controlBurst, now) || r.spend(1, now) {
		t.Fatal("after a quiet spell: want exactly one burst")
	}
	// A steady rate of one per interval goes on for ever.
	r = controlRate{}
	for i := range 1000 {
		if !r.spend(1, now+time.Duration(i)*controlInterval) {
			t.Fatalf("record %d at the steady rate refused", i)
		}
	}
}

// One turn hands crypto/tls at most Config.TurnBytes of ciphertext; the
// rest waits for another turn.
func TestTurnCiphertextBound(t *testing.T) {
	const turnBytes = 64 << 10 // the loop's bytesPerTurn
	tr := transport{turnBytes: turnBytes}
	tr.handed = 10 * turnBytes
	tr.turnStart, tr.appAt = tr.handed, tr.handed
	if err := tr.withinBounds(); err != nil || tr.throttled {
		t.Fatalf("at the turn's start: %v, throttled %v", err, tr.throttled)
	}
	tr.handed += turnBytes
	tr.appAt = tr.handed
	if err := tr.withinBounds(); err != errNoInput || !tr.throttled {
		t.Fatalf("after TurnBytes: %v, throttled %v; want errNoInput and throttled", err, tr.throttled)
	}
	tr.appAt = tr.handed - maxControlBytes - 1
	if err := tr.withinBounds(); err != errControlBytes {
		t.Fatalf("after %d bytes without application data: %v", maxControlBytes+1, err)
	}
}
