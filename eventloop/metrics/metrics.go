// Package metrics defines the server's Prometheus metrics.
//
// The owner loop updates them on the hot path, so every series it touches is
// resolved once here: a counter increment is then one atomic add, with no
// label lookup, lock or allocation per frame.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/monolock/monolock/protocol"
)

// ReleaseReason says why a holder stopped holding.
type ReleaseReason uint8

// The release reasons, in the order of ReleaseReasons.
const (
	ReleaseGraceful ReleaseReason = iota
	ReleaseExpired
	ReleaseIOTimeout
	ReleaseForce
	ReleaseShutdown
	ReleaseProtocolError
	releaseReasons
)

var releaseReasonNames = [releaseReasons]string{"graceful", "expired", "io_timeout", "force", "shutdown", "protocol_error"}

func (r ReleaseReason) String() string {
	if r < releaseReasons {
		return releaseReasonNames[r]
	}
	return "unknown"
}

// Metrics are the server's series. The zero value is not usable; call New.
type Metrics struct {
	ConnectionsActive   prometheus.Gauge
	LocksHeld           prometheus.Gauge
	Waiters             prometheus.Gauge
	Acquires            prometheus.Counter
	ACLDenials          prometheus.Counter
	ConnectionsAccepted prometheus.Counter
	AcceptErrors        prometheus.Counter
	TLSHandshakeErrors  prometheus.Counter
	Heartbeats          prometheus.Counter
	WaitSeconds         prometheus.Observer
	HoldSeconds         prometheus.Observer

	releases       [releaseReasons]prometheus.Counter
	protocolErrors [256]prometheus.Counter // by wire code; only defined codes are set
}

// New creates the metrics and registers them, with the Go runtime and process
// collectors, on reg. A nil reg leaves them unregistered (they still count).
func New(reg prometheus.Registerer) *Metrics {
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: "monolock_" + name, Help: help})
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: "monolock_" + name, Help: help})
	}
	// Lock waits and holds range from microseconds (a free lock) to days (a
	// leader); exponential buckets from 100µs by ×4 cover that in 14 steps.
	buckets := prometheus.ExponentialBuckets(0.0001, 4, 14)
	wait := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "monolock_wait_seconds", Help: "Time from ACQUIRE to the grant.", Buckets: buckets})
	hold := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "monolock_hold_seconds", Help: "Time from the grant to the release.", Buckets: buckets})
	releases := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "monolock_releases_total", Help: "Locks released, by reason."}, []string{"reason"})
	protoErrs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "monolock_protocol_errors_total", Help: "ERROR frames sent for client errors, by wire code."}, []string{"code"})

	m := &Metrics{
		ConnectionsActive:   gauge("connections_active", "Open protocol connections."),
		LocksHeld:           gauge("locks_held", "Locks with a holder."),
		Waiters:             gauge("waiters", "Sessions queued behind a holder."),
		Acquires:            counter("acquires_total", "Valid ACQUIRE frames."),
		ACLDenials:          counter("acl_denials_total", "ACQUIREs denied by the ACL."),
		ConnectionsAccepted: counter("connections_accepted_total", "Protocol connections accepted."),
		AcceptErrors:        counter("accept_errors_total", "Failed accepts (descriptor exhaustion and others)."),
		TLSHandshakeErrors:  counter("tls_handshake_errors_total", "Failed or timed-out TLS handshakes."),
		Heartbeats:          counter("heartbeats_total", "HEARTBEAT frames answered."),
		WaitSeconds:         wait,
		HoldSeconds:         hold,
	}
	for r := range releaseReasons {
		m.releases[r] = releases.WithLabelValues(r.String())
	}
	for _, code := range protocol.Codes() {
		m.protocolErrors[code] = protoErrs.WithLabelValues(code.Label())
	}
	if reg != nil {
		reg.MustRegister(m.ConnectionsActive, m.LocksHeld, m.Waiters, m.Acquires, m.ACLDenials,
			m.ConnectionsAccepted, m.AcceptErrors, m.TLSHandshakeErrors, m.Heartbeats,
			wait, hold, releases, protoErrs,
			collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return m
}

// Released counts a holder's release.
func (m *Metrics) Released(r ReleaseReason) { m.releases[r].Inc() }

// ProtocolError counts an ERROR frame sent with code.
func (m *Metrics) ProtocolError(code protocol.Code) {
	if c := m.protocolErrors[code]; c != nil {
		c.Inc()
	}
}
