package eventloop

import (
	"crypto/tls"
	"time"

	"github.com/rs/zerolog"

	"github.com/monolock/monolock/internal/fdgate"
)

// DefaultIOTimeout bounds every I/O wait the server grants a peer.
const DefaultIOTimeout = 5 * time.Second

// Config is the server's configuration. The zero value listens on the
// default address with the default io-timeout and logs nothing.
type Config struct {
	// ListenAddress is the protocol's TCP address; "127.0.0.1:0" picks a free
	// port (see Server.Addr).
	ListenAddress string
	// TestWallClockOffset, when set, is added to every reading of the wall
	// clock (tokens, audit times), never to a duration: for tests only, to
	// step a running server's clock without stepping the machine's. Nil in
	// every real server. Ignored with HA: there the loop compares its
	// readings with the etcd side's by their monotonic part, which a real
	// step leaves alone but time.Time.Add would move too, and tokens never
	// read the clock; the etcd side applies the offset to the one wall
	// reading it makes (a term's first block).
	TestWallClockOffset func() time.Duration
	// IOTimeout bounds a connection that has not completed its ACQUIRE, a
	// frame left half-sent, and output the peer does not drain.
	IOTimeout time.Duration
	// Logger receives diagnostics.
	Logger zerolog.Logger
	// Metrics, if set, counts what the server does (see package metrics).
	Metrics Metrics
	// Audit, if set, receives one event per ownership change (see package
	// audit).
	Audit AuditRecorder
	// TLS, if set, makes the protocol port speak TLS only; with client
	// certificates required it derives each session's identity. Use
	// GetConfigForClient to rotate material without a restart.
	TLS *tls.Config
	// Identity, if set, names the client of each TLS session from its
	// verified certificate chain (see certs.Identity); sessions have no
	// identity without it.
	Identity IdentityFunc
	// Authorizer, if set, decides which identity may ACQUIRE which lock.
	Authorizer Authorizer
	// MaxTLSHandshakes bounds the TLS handshakes computing at once. A
	// handshake holds a slot only while it has the client's input to work
	// on, never while it waits for the client, so the bound shares the CPU
	// among a crowd reconnecting at once and no slow client holds one.
	MaxTLSHandshakes int
	// WaiterSilenceLimit is how long a waiter must have sent nothing before
	// it may be closed at the descriptor limit to accept a new connection
	// (see release.go); DefaultWaiterSilenceLimit when 0.
	WaiterSilenceLimit time.Duration
	// Descriptors, if set, is shared with the process's HTTP listeners: at
	// the descriptor limit, one that has no descriptor left gets the next
	// one the server frees by eviction before the protocol port does (see
	// package fdgate).
	Descriptors *fdgate.Gate
	// HA, if set, makes the server one node of a cluster led through etcd
	// (ha.go): the lock port is open only while the node leads, after the
	// new leader's wait, and tokens come from blocks reserved in etcd.
	// ListenAddress must then have a fixed port. Nil: a single server,
	// exactly as without it.
	HA *HAConfig
}

// DefaultWaiterSilenceLimit is the default WaiterSilenceLimit: a client that
// heartbeats every lease/4, as the protocol says, is never closed for its
// silence with a lease under 4 minutes.
const DefaultWaiterSilenceLimit = time.Minute

// DefaultMaxTLSHandshakes is the default bound on TLS handshakes computing
// at once: more than enough to keep every core busy.
const DefaultMaxTLSHandshakes = 64

// DefaultListenAddress is where the server listens unless told otherwise.
const DefaultListenAddress = "0.0.0.0:7070"

func (c Config) withDefaults() Config {
	if c.ListenAddress == "" {
		c.ListenAddress = DefaultListenAddress
	}
	if c.IOTimeout <= 0 {
		c.IOTimeout = DefaultIOTimeout
	}
	if c.WaiterSilenceLimit <= 0 {
		c.WaiterSilenceLimit = DefaultWaiterSilenceLimit
	}
	if c.Metrics == nil {
		c.Metrics = noMetrics{}
	}
	if c.Audit == nil {
		c.Audit = noAudit{}
	}
	if c.MaxTLSHandshakes <= 0 {
		c.MaxTLSHandshakes = DefaultMaxTLSHandshakes
	}
	return c
}
