package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monolock/monolock/protocol"
)

func TestBackoffDoublesUpToFiveSeconds(t *testing.T) {
	steps := []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 5000 * ms, 5000 * ms}
	var high, low backoff
	for i, step := range steps {
		if got := high.next(func(n int64) int64 { return n - 1 }); got != step {
			t.Errorf("attempt %d, highest jitter: %v, want %v", i, got, step)
		}
		if got := low.next(func(int64) int64 { return 0 }); got != step/2 {
			t.Errorf("attempt %d, lowest jitter: %v, want %v", i, got, step/2)
		}
	}
	var b backoff
	for i, step := range steps {
		if got := b.next(rand.Int64N); got < step/2 || got > step {
			t.Errorf("attempt %d: %v outside [%v, %v]", i, got, step/2, step)
		}
	}
}

func TestTransient(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&ServerError{Code: protocol.CodeShuttingDown}, true},
		{&ServerError{Code: protocol.CodeClosedByAdmin}, true},
		{&ServerError{Code: 0x0f}, true},
		{&ServerError{Code: protocol.CodeNotAuthorized}, false},
		{&ServerError{Code: 0x42}, false},
		{&dialError{address: "x", err: refused}, true},
		{&dialError{address: "x", err: &net.OpError{Op: "dial", Err: &net.AddrError{Err: "missing port in address"}}}, false},
		{&dialError{address: "x", err: &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}}, false},
		{&dialError{address: "x", err: tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}}, false},
		{fmt.Errorf("%w: EOF", ErrConnectionClosed), true},
		{fmt.Errorf("%w (400ms)", ErrHeartbeatTimeout), true},
		{fmt.Errorf("%w: token changed", ErrProtocolViolation), false},
		{protocol.ErrNameTooLong, false},
		{context.Canceled, false},
		{errors.New("something else"), false},
	} {
		if got := transient(tc.err); got != tc.want {
			t.Errorf("transient(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// A refused dial names the address once, not once per layer.
func TestDialErrorNamesTheAddressOnce(t *testing.T) {
	_, err := net.Dial("tcp", "127.0.0.1:1")
	if err == nil {
		t.Skip("something listens on 127.0.0.1:1")
	}
	msg := (&dialError{address: "127.0.0.1:1", err: err}).Error()
	if n := strings.Count(msg, "127.0.0.1:1"); n != 1 || !strings.HasPrefix(msg, "monolock: dial 127.0.0.1:1: ") || !strings.Contains(msg, "refused") {
		t.Errorf("%q: want the address once, then the cause", msg)
	}
}

func TestShutdownJitter(t *testing.T) {
	for _, tc := range []struct {
		lease, limit time.Duration
	}{
		{10 * time.Second, time.Second},           // capped at 1s
		{2 * time.Second, 500 * time.Millisecond}, // a quarter of the lease
		{time.Millisecond, 250 * time.Microsecond},
	} {
		if got := shutdownJitter(tc.lease, func(int64) int64 { return 0 }); got != 0 {
			t.Errorf("lease %v, lowest: %v, want 0", tc.lease, got)
		}
		if got := shutdownJitter(tc.lease, func(n int64) int64 { return n - 1 }); got != tc.limit {
			t.Errorf("lease %v, highest: %v, want %v", tc.lease, got, tc.limit)
		}
		for range 100 {
			if got := shutdownJitter(tc.lease, rand.Int64N); got < 0 || got > tc.limit {
				t.Errorf("lease %v: %v outside [0, %v]", tc.lease, got, tc.limit)
			}
		}
	}
}
