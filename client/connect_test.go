package client

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// TestConnectTimeoutRule: zero or negative is the default; anything else is
// taken as given.
func TestConnectTimeoutRule(t *testing.T) {
	for _, tc := range []struct{ configured, want time.Duration }{
		{0, DefaultConnectTimeout},
		{-time.Second, DefaultConnectTimeout},
		{time.Nanosecond, time.Nanosecond},
		{250 * ms, 250 * ms},
		{time.Minute, time.Minute},
	} {
		if got := connectTimeout(tc.configured); got != tc.want {
			t.Errorf("connectTimeout(%v) = %v, want %v", tc.configured, got, tc.want)
		}
	}
	if DefaultConnectTimeout != 10*time.Second {
		t.Errorf("DefaultConnectTimeout = %v; the doc and the other clients say 10s", DefaultConnectTimeout)
	}
}

// stalledTLSPeer accepts connections, reads the ClientHello and answers
// nothing: a handshake stalled mid-way. It returns the address and a
// channel that receives each ClientHello's first bytes.
func stalledTLSPeer(t *testing.T) (string, <-chan []byte) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hellos := make(chan []byte, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = c.Close() })
			go func() {
				buf := make([]byte, 5)
				if n, _ := c.Read(buf); n > 0 {
					hellos <- buf[:n]
				}
			}()
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
	return ln.Addr().String(), hellos
}

// TestConnectTimeoutStalledHandshake: a TLS peer that reads the ClientHello
// and never answers ends Acquire with a context that has no deadline: the
// dial fails with the connect timeout, named, as a transient error that is
// ErrConnectTimeout and not context.DeadlineExceeded (the caller's deadline
// did not pass: a caller that reads DeadlineExceeded as "busy" must not
// take an unreachable server for a held lock).
func TestConnectTimeoutStalledHandshake(t *testing.T) {
	addr, hellos := stalledTLSPeer(t)
	c := New(Config{Address: addr, Dialer: &tls.Dialer{Config: &tls.Config{ServerName: "monolock.test"}}, ConnectTimeout: 200 * ms})
	done := make(chan error, 1)
	go func() {
		_, err := c.Acquire(context.Background(), "stalled", time.Second)
		done <- err
	}()
	if hello := await(t, hellos, "a ClientHello"); hello[0] != 0x16 {
		t.Fatalf("the peer read %x, want a TLS handshake record", hello)
	}
	err := await(t, done, "Acquire to give up on the stalled handshake")
	if !errors.Is(err, ErrConnectTimeout) || !strings.Contains(err.Error(), "200ms") || !strings.Contains(err.Error(), "ConnectTimeout") {
		t.Fatalf("Acquire = %v; want the connect timeout (200ms, Config.ConnectTimeout) as ErrConnectTimeout", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Acquire = %v: matches context.DeadlineExceeded, but the caller's ctx has no deadline", err)
	}
	if !transient(err) {
		t.Errorf("a connect timeout is not retried by DoRetry: %v", err)
	}
}

// TestConnectTimeoutCallerDeadlineFirst: a ctx deadline shorter than the
// connect timeout ends the dial with the caller's own error, not the
// connect timeout's.
func TestConnectTimeoutCallerDeadlineFirst(t *testing.T) {
	addr, _ := stalledTLSPeer(t)
	c := New(Config{Address: addr, Dialer: &tls.Dialer{Config: &tls.Config{ServerName: "monolock.test"}}, ConnectTimeout: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Acquire(ctx, "stalled", time.Second)
		done <- err
	}()
	cancel()
	err := await(t, done, "Acquire to return on the cancelled ctx")
	if !errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "ConnectTimeout") {
		t.Fatalf("Acquire = %v; want the caller's context.Canceled, not the connect timeout", err)
	}
}

// deadlineDialer records the deadline of the ctx it is given and fails.
type deadlineDialer struct {
	deadline time.Time
	ok       bool
}

func (d *deadlineDialer) DialContext(ctx context.Context, _, _ string) (net.Conn, error) {
	d.deadline, d.ok = ctx.Deadline()
	return nil, errors.New("refused by the test")
}

// TestConnectTimeoutBoundsTheDial: the Dialer gets a ctx whose deadline is
// the connect timeout from the dial (the default when unset), though the
// caller's ctx has none; a sooner caller deadline is kept.
func TestConnectTimeoutBoundsTheDial(t *testing.T) {
	for _, tc := range []struct {
		name       string
		configured time.Duration
		callerIn   time.Duration // 0: no caller deadline
		want       time.Duration
	}{
		{"default", 0, 0, DefaultConnectTimeout},
		{"configured", 300 * ms, 0, 300 * ms},
		{"the caller's deadline is sooner", time.Minute, time.Second, time.Second},
		{"the connect timeout is sooner", 300 * ms, time.Minute, 300 * ms},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &deadlineDialer{}
			c := New(Config{Dialer: d, ConnectTimeout: tc.configured})
			ctx := context.Background()
			before := time.Now()
			if tc.callerIn > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, before.Add(tc.callerIn))
				defer cancel()
			}
			if _, err := c.Acquire(ctx, "bounded", time.Second); err == nil {
				t.Fatal("Acquire succeeded with a failing Dialer")
			}
			after := time.Now()
			if !d.ok {
				t.Fatal("the Dialer got a ctx without a deadline")
			}
			if lo, hi := before.Add(tc.want), after.Add(tc.want); d.deadline.Before(lo) || d.deadline.After(hi) {
				t.Errorf("the dial's deadline is %v after the call, want %v", d.deadline.Sub(before), tc.want)
			}
		})
	}
}
