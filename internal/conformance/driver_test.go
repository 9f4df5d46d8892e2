package conformance

import (
	"strings"
	"testing"
	"time"
)

// TestDecidedAt: a driver's mono_ns lands on the kit's timeline as far back
// from the kit's now as it is on CLOCK_MONOTONIC, and a time the client
// cannot have decided at (later than the kit's now, earlier than the
// request) is refused.
func TestDecidedAt(t *testing.T) {
	wallNow := time.Now()
	const sent, now = int64(5e9), int64(9e9)
	at, err := decidedAt(now-int64(1500*time.Millisecond), sent, now, wallNow)
	if err != nil {
		t.Fatal(err)
	}
	if d := wallNow.Sub(at); d != 1500*time.Millisecond {
		t.Errorf("an event decided 1.5s ago is placed %v before the kit's now", d)
	}
	for _, c := range []struct {
		mono int64
		want string
	}{
		{now + 1, "in the kit's future"},
		{sent - 1, "before the kit sent the request"},
	} {
		if _, err := decidedAt(c.mono, sent, now, wallNow); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("mono_ns %d (request sent at %d, now %d): got %v, want an error saying %q", c.mono, sent, now, err, c.want)
		}
	}
	if at, err := decidedAt(sent, sent, now, wallNow); err != nil || !at.Equal(wallNow.Add(-4*time.Second)) {
		t.Errorf("mono_ns at the request's send: got %v, %v, want 4s before the kit's now", at, err)
	}
}

// TestNextRefusesAnImpossibleStamp: a driver that stamps an event with a
// CLOCK_MONOTONIC reading from before its request gets an error naming it,
// not an event with a made-up time.
func TestNextRefusesAnImpossibleStamp(t *testing.T) {
	d := Driver{Name: "sh", Argv: []string{"/bin/sh", "-c", `read req; echo '{"event":"lost","reason":"r","mono_ns":1}'; read eof`}}
	p, err := Start(d, "sh", NewRequest("127.0.0.1:1", "x", time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ev, err := p.Next(10 * time.Second)
	if err == nil || !strings.Contains(err.Error(), "before the kit sent the request") {
		t.Fatalf("got %v, %v, want an error saying mono_ns is before the request", ev, err)
	}
}
