package eventloop

import (
	"crypto/tls"
	"net"
	"time"

	"github.com/monolock/monolock/locktable"
	"github.com/monolock/monolock/protocol"
)

// The loop reports what happens to the features beside it — metrics, the
// audit stream, access control, identities — through these small
// interfaces, so that it depends on none of their packages. Every method is
// called on the event loop, except Metrics.TLSChainRefused (from handshake
// goroutines, so it must be safe for concurrent use), and must return at
// once: no I/O, no waiting.

// Metrics counts what the loop does. Config.Metrics nil counts nothing
// (noMetrics): the loop never checks for nil.
type Metrics interface {
	Opened()                                                     // a connection joined the loop
	Closed()                                                     // and left it
	Heartbeat()                                                  // a HEARTBEAT was answered
	Queued()                                                     // a session joined a queue
	Dequeued()                                                   // one left it, by promotion or departure
	Granted(waited time.Duration)                                // a fencing token was issued
	Released(reason locktable.ReleaseReason, held time.Duration) // a holder let go, for reason
	ProtocolError(code protocol.Code)                            // an ERROR was sent
	ACLDenied()                                                  // the Authorizer refused an ACQUIRE
	AcceptError()                                                // accepting or enrolling a connection failed
	Evicted()                                                    // a connection without ACQUIRE was closed at the descriptor limit
	SilentWaiterEvicted()                                        // a waiter silent past WaiterSilenceLimit was closed at the descriptor limit
	ShareEvicted()                                               // a session of the source with the most non-holders was closed at the descriptor limit, for a newcomer from a source with fewer
	NewcomerRefused()                                            // a newcomer at the descriptor limit was closed before it was a session (admission.go)
	TLSHandshakeError()                                          // a TLS handshake failed or timed out
	TLSChainRefused(bound string)                                // a client chain crossed a bound before its verification
}

// AuditRecorder receives one event per ownership change. lock, identity and
// remote say whom it concerns; identity is "" without mutual TLS. It is
// called on every grant and release, so it should not allocate: remote is
// the connection's address as is, for the recorder to format.
// ForceRelease and KickWaiter also name the operator who asked (the admin
// caller's identity, "" without mutual TLS on the admin port).
// Config.Audit nil records nothing (noAudit).
type AuditRecorder interface {
	Granted(at time.Time, lock, identity string, remote net.Addr, token uint64, waited time.Duration)
	Released(at time.Time, lock, identity string, remote net.Addr, token uint64, held time.Duration, reason string)
	Denied(at time.Time, lock, identity string, remote net.Addr)
	ForceRelease(at time.Time, lock, identity string, remote net.Addr, token uint64, operator string)
	KickWaiter(at time.Time, lock, identity string, remote net.Addr, operator string)
}

// noAudit is the AuditRecorder of a server without an audit log.
type noAudit struct{}

func (noAudit) Granted(time.Time, string, string, net.Addr, uint64, time.Duration)          {}
func (noAudit) Released(time.Time, string, string, net.Addr, uint64, time.Duration, string) {}
func (noAudit) Denied(time.Time, string, string, net.Addr)                                  {}
func (noAudit) ForceRelease(time.Time, string, string, net.Addr, uint64, string)            {}
func (noAudit) KickWaiter(time.Time, string, string, net.Addr, string)                      {}

// Authorizer is the access-control decision on ACQUIRE. Unlike the
// observers above it stays nil when there is no ACL: asking it would cost a
// copy of the lock name on every ACQUIRE.
type Authorizer interface {
	Allowed(identity, lock string) bool
}

// IdentityFunc names the client of a TLS session from its verified
// certificate chain; "" for none.
type IdentityFunc func(tls.ConnectionState) string

// noMetrics is the Metrics of a server that keeps none.
type noMetrics struct{}

func (noMetrics) Opened()                                         {}
func (noMetrics) Closed()                                         {}
func (noMetrics) Heartbeat()                                      {}
func (noMetrics) Queued()                                         {}
func (noMetrics) Dequeued()                                       {}
func (noMetrics) Granted(time.Duration)                           {}
func (noMetrics) Released(locktable.ReleaseReason, time.Duration) {}
func (noMetrics) ProtocolError(protocol.Code)                     {}
func (noMetrics) ACLDenied()                                      {}
func (noMetrics) AcceptError()                                    {}
func (noMetrics) Evicted()                                        {}
func (noMetrics) SilentWaiterEvicted()                            {}
func (noMetrics) ShareEvicted()                                   {}
func (noMetrics) NewcomerRefused()                                {}
func (noMetrics) TLSHandshakeError()                              {}
func (noMetrics) TLSChainRefused(string)                          {}
