package main

import (
	"context"
	"crypto/elliptic"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/monolock/monolock/internal/certs/certstest"
	"github.com/monolock/monolock/internal/testsupport/proc"
	"github.com/monolock/monolock/internal/testsupport/wire"
	"github.com/monolock/monolock/protocol"
)

// The attacks on what a client's certificate chain costs the mutual-TLS
// server: CPU to verify it, memory to keep it.

// evictionGrace is the server's grace before it evicts a connection that
// has not sent ACQUIRE at the descriptor limit: an honest mTLS client must
// get through its handshake well within it.
const evictionGrace = 250 * time.Millisecond

// tlsHandshake dials the mTLS server with cfg and completes a handshake the
// server has judged: in TLS 1.3 the client is done before the server has
// checked its certificate, so a first read brings the alert (or the
// session tickets and then nothing, which ends at the short deadline).
func tlsHandshake(ctx context.Context, addr string, cfg *tls.Config) (*tls.Conn, error) {
	d := net.Dialer{Timeout: time.Second}
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	_ = raw.SetDeadline(time.Now().Add(5 * time.Second))
	tc := tls.Client(raw, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = raw.Close()
		return nil, err
	}
	_ = raw.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := tc.Read(make([]byte, 1)); err != nil {
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			_ = raw.Close()
			return nil, err
		}
	}
	_ = raw.SetDeadline(time.Time{})
	return tc, nil
}

// serverCPU is the mTLS server's CPU time so far; 0 when it cannot be read.
func serverCPU(e *env) time.Duration {
	d, err := proc.CPUTime(e.mtls.Pid())
	if err != nil {
		return 0
	}
	return d
}

// --- 9: forged client chains ------------------------------------------------

var forgedChain tls.Certificate

func prepareForgedChain(e *env) ([]*witnesses, func(), error) {
	var err error
	forgedChain, err = e.pki.ForgedChain(60, elliptic.P521())
	return nil, nil, err
}

// runForgedChains calibrates for the first quarter of the attack, with 8
// honest clients handshaking over and over (the server's CPU per honest
// handshake), then runs 64 clients presenting a leaf and 60 self-signed
// P-521 certificates bearing the client CA's name (CPU per forged
// handshake), while 4 honest clients measure dial-to-ACQUIRED.
func runForgedChains(ctx context.Context, e *env) string {
	deadline, _ := ctx.Deadline()
	calibrate, cancel := context.WithDeadline(ctx, time.Now().Add(time.Until(deadline)/4))
	honestCPU, honest := cpuPer(e, func() int64 {
		var n atomic.Int64
		fleet(calibrate, 8, func(ctx context.Context, _ int) {
			if tc, err := tlsHandshake(ctx, e.tMTLS.addr, e.clientTLS()); err == nil {
				n.Add(1)
				_ = tc.Close()
			}
		})
		return n.Load()
	})
	cancel()

	forged := e.pki.WithCertificate(forgedChain)
	var refused, accepted atomic.Int64
	var mu sync.Mutex
	var took []time.Duration
	var wg sync.WaitGroup
	wg.Go(func() {
		fleet(ctx, 4, func(ctx context.Context, i int) {
			start := time.Now()
			c, err := wire.Dial(e.tMTLS.addr, wire.Options{TLS: e.clientTLS(), Safety: probeTimeout})
			if err != nil {
				return
			}
			defer c.NC.Close()
			if _, err := c.RequestErr(protocol.AppendAcquire(nil, 10_000, fmt.Sprintf("adversarial/forged/%d", i))); err == nil {
				mu.Lock()
				took = append(took, time.Since(start))
				mu.Unlock()
			}
		})
	})
	forgedCPU, _ := cpuPer(e, func() int64 {
		fleet(ctx, 64, func(ctx context.Context, _ int) {
			tc, err := tlsHandshake(ctx, e.tMTLS.addr, forged)
			switch {
			case err == nil:
				accepted.Add(1)
				_ = tc.Close()
			case ctx.Err() == nil:
				refused.Add(1)
			}
		})
		return refused.Load()
	})
	wg.Wait()
	slices.Sort(took)
	p99 := time.Duration(0)
	if len(took) > 0 {
		p99 = took[min(len(took)-1, len(took)*99/100)]
	}
	note := fmt.Sprintf("64 clients, leaf + 60 forged P-521 CAs: %d refused, %d accepted; server CPU per handshake %v forged, %v honest (%d calibration handshakes); honest dial-to-ACQUIRED p99 %v over %d (eviction grace %v)",
		refused.Load(), accepted.Load(), forgedCPU.Round(time.Microsecond), honestCPU.Round(time.Microsecond), honest,
		p99.Round(time.Millisecond), len(took), evictionGrace)
	if accepted.Load() > 0 || p99 > evictionGrace {
		note += " — VIOLATION"
	}
	return note
}

// cpuPer runs f, which reports how many handshakes it did, and returns the
// mTLS server's CPU time per handshake over it.
func cpuPer(e *env, f func() int64) (time.Duration, int64) {
	before := serverCPU(e)
	n := f()
	if n == 0 {
		return 0, 0
	}
	return (serverCPU(e) - before) / time.Duration(n), n
}

// --- 10: certificates with 1,000 SANs -----------------------------------------

var manySANs tls.Certificate

func prepareManySANs(e *env) ([]*witnesses, func(), error) {
	var err error
	manySANs, err = e.pki.ClientChain(certstest.ChainOptions{SANs: 999})
	return nil, nil, err
}

// runManySANs has 64 clients open sessions with a valid certificate of
// 1,000 SANs, up to 2,000 of them, and hold each that gets in: 137 KiB of
// server memory apiece if the server keeps the certificate, none if it
// refuses it.
func runManySANs(ctx context.Context, e *env) string {
	n := int64(fdRoom(2000))
	cfg := e.pki.WithCertificate(manySANs)
	var refused, held atomic.Int64
	before := residentBytes(e.mtls.Pid())
	var holders sync.WaitGroup
	fleet(ctx, 64, func(ctx context.Context, _ int) {
		if held.Load() >= n {
			pause(ctx, 100*time.Millisecond)
			return
		}
		tc, err := tlsHandshake(ctx, e.tMTLS.addr, cfg)
		if err != nil {
			if ctx.Err() == nil {
				refused.Add(1)
			}
			return
		}
		held.Add(1)
		holders.Go(func() { awaitClose(ctx, tc) })
	})
	holders.Wait()
	note := fmt.Sprintf("64 clients with a valid 1,000-SAN certificate, up to %d sessions: %d refused, %d held; server RSS %d MiB before",
		n, refused.Load(), held.Load(), before>>20)
	if held.Load() > 0 {
		note += " — VIOLATION"
	}
	return note
}
