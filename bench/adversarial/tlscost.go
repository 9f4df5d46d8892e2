package main

import (
	"context"
	"crypto/elliptic"
	"crypto/tls"
	"fmt"
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

// violation marks an attack-side note that reports a broken bound; the run
// counts it as a violation, as it does the witnesses' failures.
const violation = "VIOLATION"

// evictionGrace is the server's grace before it evicts a connection that
// has not sent ACQUIRE at the descriptor limit: an honest mTLS client must
// get through its handshake well within it.
const evictionGrace = 250 * time.Millisecond

// judged dials the mTLS server with cfg and sends an ACQUIRE of name: in
// TLS 1.3 the client's handshake is done before the server has checked its
// certificate, so only the answer tells a session let in (nil error) from a
// refused one (the alert).
func judged(addr string, cfg *tls.Config, name string) (*wire.Conn, error) {
	c, err := wire.Dial(addr, wire.Options{TLS: cfg, Safety: 5 * time.Second})
	if err != nil {
		return nil, err
	}
	if _, err := c.RequestErr(protocol.AppendAcquire(nil, 60_000, name)); err != nil {
		_ = c.NC.Close()
		return nil, err
	}
	return c, nil
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

// prepareForgedChain returns the forged chain the attackers present.
func prepareForgedChain(e *env) (tls.Certificate, []*witnesses, func(), error) {
	forgedChain, err := e.pki.ForgedChain(e.cfg.forgedCerts, elliptic.P521())
	return forgedChain, nil, nil, err
}

// runForgedChains calibrates for the first quarter of the attack with 4
// honest clients taking a lock on a fresh connection over and over (the
// server's CPU per honest connection, their dial-to-ACQUIRED p99), then
// adds 64 clients presenting a leaf and -forged-certs (60) self-signed P-521 certificates
// bearing the client CA's name (the server's CPU per forged handshake, the
// honest clients' p99 under the attack).
func runForgedChains(ctx context.Context, e *env, forgedChain tls.Certificate) string {
	deadline, _ := ctx.Deadline()
	calibrate, cancel := context.WithDeadline(ctx, time.Now().Add(time.Until(deadline)/4))
	var honest honestClients
	cpu0 := serverCPU(e)
	honest.run(calibrate, e)
	cancel()
	cpu1 := serverCPU(e)
	calm := honest.take()
	honestCPU := time.Duration(0)
	if len(calm) > 0 {
		honestCPU = (cpu1 - cpu0) / time.Duration(len(calm))
	}

	forged := e.pki.WithCertificate(forgedChain)
	var refused, accepted atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() { honest.run(ctx, e) })
	fleet(ctx, 64, func(ctx context.Context, i int) {
		c, err := judged(e.tMTLS.addr, forged, fmt.Sprintf("adversarial/forged/%d", i))
		switch {
		case err == nil:
			accepted.Add(1)
			_ = c.NC.Close()
		case ctx.Err() == nil:
			refused.Add(1)
		}
	})
	wg.Wait()
	cpu2 := serverCPU(e)
	attacked := honest.take()
	forgedCPU := time.Duration(0)
	if n := refused.Load(); n > 0 {
		forgedCPU = (cpu2 - cpu1 - honestCPU*time.Duration(len(attacked))) / time.Duration(n)
	}
	chainBytes := 0
	for _, der := range forgedChain.Certificate {
		chainBytes += len(der)
	}
	note := fmt.Sprintf("64 clients, leaf + %d forged P-521 CAs (%d bytes): %d refused, %d let in; server CPU per connection %v forged, %v honest (%.2f×); honest dial-to-ACQUIRED p50/p99 %v/%v over %d under the attack, %v/%v over %d before it (eviction grace %v)",
		len(forgedChain.Certificate)-1, chainBytes, refused.Load(), accepted.Load(), forgedCPU.Round(time.Microsecond), honestCPU.Round(time.Microsecond), float64(forgedCPU)/float64(max(honestCPU, 1)),
		quantile(attacked, 50), quantile(attacked, 99), len(attacked), quantile(calm, 50), quantile(calm, 99), len(calm), evictionGrace)
	if accepted.Load() > 0 {
		note += " — " + violation + ": forged chains let in"
	}
	return note
}

// honestClients are 4 mTLS clients taking a lock on a fresh connection over
// and over, timing each from dial to ACQUIRED.
type honestClients struct {
	mu   sync.Mutex
	took []time.Duration
}

func (h *honestClients) run(ctx context.Context, e *env) {
	fleet(ctx, 4, func(ctx context.Context, i int) {
		start := time.Now()
		c, err := judged(e.tMTLS.addr, e.clientTLS(), fmt.Sprintf("adversarial/honest/%d", i))
		if err != nil {
			pause(ctx, 10*time.Millisecond)
			return
		}
		_ = c.NC.Close()
		h.mu.Lock()
		h.took = append(h.took, time.Since(start))
		h.mu.Unlock()
	})
}

// take returns the times so far, sorted, and starts over.
func (h *honestClients) take() []time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	took := h.took
	h.took = nil
	slices.Sort(took)
	return took
}

// quantile is the pct-th percentile of sorted, to the millisecond.
func quantile(sorted []time.Duration, pct int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, len(sorted)*pct/100)].Round(time.Millisecond)
}

// --- 10: certificates with 1,000 SANs -----------------------------------------

// prepareManySANs returns the certificate of 1,000 SANs.
func prepareManySANs(e *env) (tls.Certificate, []*witnesses, func(), error) {
	manySANs, err := e.pki.ClientChain(certstest.ChainOptions{SANs: 999})
	return manySANs, nil, nil, err
}

// runManySANs has 64 clients open sessions with a valid certificate of
// 1,000 SANs, up to 2,000 of them, and hold each that gets in: 137 KiB of
// server memory apiece if the server keeps the certificate, none if it
// refuses it.
func runManySANs(ctx context.Context, e *env, manySANs tls.Certificate) string {
	n := int64(fdRoom(2000))
	cfg := e.pki.WithCertificate(manySANs)
	var refused, held, seq atomic.Int64
	before := residentBytes(e.mtls.Pid())
	var holders sync.WaitGroup
	fleet(ctx, 64, func(ctx context.Context, _ int) {
		if held.Load() >= n {
			pause(ctx, 100*time.Millisecond)
			return
		}
		c, err := judged(e.tMTLS.addr, cfg, fmt.Sprintf("adversarial/sans/%d", seq.Add(1)))
		if err != nil {
			if ctx.Err() == nil {
				refused.Add(1)
			}
			return
		}
		held.Add(1)
		holders.Go(func() { awaitClose(ctx, c.NC) })
	})
	holders.Wait()
	note := fmt.Sprintf("64 clients with a valid 1,000-SAN certificate, up to %d sessions: %d refused, %d held; server RSS %d MiB before",
		n, refused.Load(), held.Load(), before>>20)
	if held.Load() > 0 {
		note += " — " + violation + ": sessions with 1,000 SANs let in"
	}
	return note
}
