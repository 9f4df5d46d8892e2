// Package metrics defines the server's Prometheus metrics.
//
// The owner loop updates them on the hot path, so every series it touches is
// resolved once here: a counter increment is then one atomic add, with no
// label lookup, lock or allocation per frame.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/monolock/monolock/internal/acl"
	"github.com/monolock/monolock/internal/certs"
	"github.com/monolock/monolock/locktable"
	"github.com/monolock/monolock/protocol"
)

// Metrics are the server's series. A server without an ops endpoint has
// none: the event loop then counts into its own no-op.
type Metrics struct {
	connectionsActive   prometheus.Gauge
	locksHeld           prometheus.Gauge
	waiters             prometheus.Gauge
	acquires            prometheus.Counter
	aclDenials          prometheus.Counter
	connectionsAccepted prometheus.Counter
	acceptErrors        prometheus.Counter
	evictions           prometheus.Counter
	silentWaiterEvicts  prometheus.Counter
	shareEvictions      prometheus.Counter
	newcomersRefused    prometheus.Counter
	tlsHandshakeErrors  prometheus.Counter
	tlsChainRefusals    *prometheus.CounterVec // by bound (certs.Bound*); every series exists from the start
	heartbeats          prometheus.Counter
	waitSeconds         prometheus.Observer
	holdSeconds         prometheus.Observer
	releases            [locktable.ReleaseReasons]prometheus.Counter // by reason; every series exists from the start
	protocolErrors      [256]prometheus.Counter                      // by wire code; only defined codes are set
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
	protoErrs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "monolock_protocol_errors_total", Help: "ERROR frames sent, by wire code: client errors, 0x01 at shutdown and 0x02 by an administrator."}, []string{"code"})

	chains := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "monolock_tls_client_chains_refused_total", Help: "Client certificate chains refused before verification, by the bound they crossed."}, []string{"bound"})
	for _, b := range certs.ChainBounds() {
		chains.WithLabelValues(b)
	}
	m := &Metrics{
		tlsChainRefusals:    chains,
		connectionsActive:   gauge("connections_active", "Open protocol connections."),
		locksHeld:           gauge("locks_held", "Locks with a holder."),
		waiters:             gauge("waiters", "Sessions queued behind a holder."),
		acquires:            counter("acquires_total", "Ownerships granted, i.e. fencing tokens issued: first grants and promotions."),
		aclDenials:          counter("acl_denials_total", "ACQUIREs denied by the ACL."),
		connectionsAccepted: counter("connections_accepted_total", "Protocol connections accepted."),
		acceptErrors:        counter("accept_errors_total", "Failed accepts (descriptor exhaustion and others)."),
		evictions:           counter("evictions_total", "Connections closed at the descriptor limit before their ACQUIRE, to accept a new one."),
		silentWaiterEvicts:  counter("silent_waiters_evicted_total", "Waiters silent for -waiter-silence-limit closed at the descriptor limit, to accept a new connection."),
		shareEvictions:      counter("share_evictions_total", "Sessions not holding a lock closed at the descriptor limit because their source had the most, for a newcomer from a source with fewer."),
		newcomersRefused:    counter("newcomers_refused_total", "Connections closed at the descriptor limit before they were sessions: their source already had its share, and nothing could be closed in their place."),
		tlsHandshakeErrors:  counter("tls_handshake_errors_total", "Failed or timed-out TLS handshakes."),
		heartbeats:          counter("heartbeats_total", "HEARTBEAT frames answered."),
		waitSeconds:         wait,
		holdSeconds:         hold,
	}
	for r := range locktable.ReleaseReasons {
		m.releases[r] = releases.WithLabelValues(r.String())
	}
	for _, code := range protocol.Codes() {
		m.protocolErrors[code] = protoErrs.WithLabelValues(code.Label())
	}
	if reg != nil {
		reg.MustRegister(m.connectionsActive, m.locksHeld, m.waiters, m.acquires, m.aclDenials,
			m.connectionsAccepted, m.acceptErrors, m.evictions, m.silentWaiterEvicts, m.shareEvictions, m.newcomersRefused, m.tlsHandshakeErrors, m.heartbeats,
			wait, hold, releases, protoErrs, chains,
			collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return m
}

// Opened counts a new connection.
func (m *Metrics) Opened() {
	m.connectionsActive.Inc()
	m.connectionsAccepted.Inc()
}

// Closed counts a connection's end.
func (m *Metrics) Closed() {
	m.connectionsActive.Dec()
}

// Heartbeat counts an answered HEARTBEAT.
func (m *Metrics) Heartbeat() {
	m.heartbeats.Inc()
}

// Queued counts a session joining a queue; Dequeued one leaving it.
func (m *Metrics) Queued() {
	m.waiters.Inc()
}

// Dequeued counts a session leaving a queue, by promotion or departure.
func (m *Metrics) Dequeued() {
	m.waiters.Dec()
}

// Granted counts a grant after wait in the queue (zero for a free lock).
func (m *Metrics) Granted(wait time.Duration) {
	m.acquires.Inc()
	m.locksHeld.Inc()
	m.waitSeconds.Observe(wait.Seconds())
}

// Released counts a holder's release, for reason, after holding for held.
func (m *Metrics) Released(reason locktable.ReleaseReason, held time.Duration) {
	m.locksHeld.Dec()
	m.holdSeconds.Observe(held.Seconds())
	m.releases[reason].Inc()
}

// ProtocolError counts an ERROR frame sent with code.
func (m *Metrics) ProtocolError(code protocol.Code) {
	if m.protocolErrors[code] != nil {
		m.protocolErrors[code].Inc()
	}
}

// ACLDenied counts an ACQUIRE the ACL refused.
func (m *Metrics) ACLDenied() {
	m.aclDenials.Inc()
}

// AcceptError counts a failed accept or enrollment.
func (m *Metrics) AcceptError() {
	m.acceptErrors.Inc()
}

// Evicted counts a connection closed before its ACQUIRE because no
// descriptor was left for a new one.
func (m *Metrics) Evicted() {
	m.evictions.Inc()
}

// SilentWaiterEvicted counts a waiter closed for its silence because no
// descriptor was left for a new connection.
func (m *Metrics) SilentWaiterEvicted() {
	m.silentWaiterEvicts.Inc()
}

// ShareEvicted counts a session closed at the descriptor limit because its
// source had the most that are not holders.
func (m *Metrics) ShareEvicted() {
	m.shareEvictions.Inc()
}

// NewcomerRefused counts a connection closed at the descriptor limit before
// it was a session.
func (m *Metrics) NewcomerRefused() {
	m.newcomersRefused.Inc()
}

// TLSHandshakeError counts a failed or timed-out TLS handshake.
func (m *Metrics) TLSHandshakeError() {
	m.tlsHandshakeErrors.Inc()
}

// TLSChainRefused counts a client certificate chain refused, before its
// verification, for crossing bound.
func (m *Metrics) TLSChainRefused(bound string) {
	m.tlsChainRefusals.WithLabelValues(bound).Inc()
}

// AuditSource is what the audit log reports about itself (see audit.Log).
type AuditSource interface {
	WriteErrors() uint64
	DroppedEvents() uint64
	PendingBytes() int
}

// RegisterAudit registers the audit log's series on reg. They are read from
// a at scrape time, so the event loop pays nothing for them. A nil reg or a
// nil a registers nothing.
func RegisterAudit(reg prometheus.Registerer, a AuditSource) {
	if reg == nil || a == nil {
		return
	}
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "monolock_audit_write_errors_total",
			Help: "Failed writes to the audit destination; a failed write is retried every 100 ms."},
			func() float64 { return float64(a.WriteErrors()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "monolock_audit_dropped_events_total",
			Help: "Audit events dropped because the destination fell too far behind; lock traffic went on without them."},
			func() float64 { return float64(a.DroppedEvents()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "monolock_audit_pending_bytes",
			Help: "Audit events in memory waiting for the destination, in bytes; events are dropped beyond 8 MiB."},
			func() float64 { return float64(a.PendingBytes()) }),
	)
}

// AdminMetrics count what the admin API refuses.
type AdminMetrics struct {
	refusals map[string]prometheus.Counter // by role; every series exists from the start
}

// RegisterAdmin creates the admin API's series and registers them on reg
// (nil: unregistered, they still count).
func RegisterAdmin(reg prometheus.Registerer) *AdminMetrics {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "monolock_admin_denials_total",
		Help: "Admin API calls refused with 403 because the caller's identity lacks the role, by role."}, []string{"role"})
	m := &AdminMetrics{refusals: map[string]prometheus.Counter{}}
	for _, role := range acl.AllRoles.Names() {
		m.refusals[role] = vec.WithLabelValues(role)
	}
	if reg != nil {
		reg.MustRegister(vec)
	}
	return m
}

// AdminRefused counts an admin call refused for want of role.
func (m *AdminMetrics) AdminRefused(role string) {
	if c := m.refusals[role]; c != nil {
		c.Inc()
	}
}
