// Package admin declares the JSON bodies of monolock's admin HTTP API, once
// for both sides: the server (internal/adminhttp) encodes them and
// monolockctl decodes them. It depends on the standard library only, so a
// client can import it without the server.
//
//	GET    /api/whoami                                WhoAmI
//	GET    /api/info                                  ServerInfo
//	GET    /api/locks[?match=GLOB][&limit=N][&after=NAME]  LockList
//	GET    /api/locks/{name}                          LockInfo
//	POST   /api/locks/{name}/release                  ReleaseResponse
//	DELETE /api/locks/{name}/waiters/{remote_addr}    KickResponse
//
// LockQuery and Stats are not JSON: they are what the admin API asks of
// the running server (which answers a LockQuery with a LockList), declared here so that neither imports the
// other.
//
// Every error answer is an ErrorResponse. A call the caller has no role for
// is answered 403, saying which role is missing and how to grant it.
//
// Tokens are uint64 values that pass 2^53 and 2^63: decode them into
// unsigned 64-bit integers, not floating point, or they lose their low bits
// (in JavaScript, read the number's source text with JSON.parse's reviver
// and make it a BigInt, as the console does).
package admin

import "time"

// LockInfo is one lock with its holder and its queue, as the admin API shows
// it.
type LockInfo struct {
	Name    string       `json:"name"`
	Holder  HolderInfo   `json:"holder"`
	Waiters []WaiterInfo `json:"waiters"`
}

// HolderInfo describes a lock's holder.
type HolderInfo struct {
	Identity   string    `json:"identity"`
	RemoteAddr string    `json:"remote_addr"`
	Since      time.Time `json:"since"`
	LeaseMS    int64     `json:"lease_ms"`
	Token      uint64    `json:"token"`
	// LastHeartbeat is when the server last heard from the holder: its
	// ACQUIRE or its latest HEARTBEAT. The lease runs out LeaseMS after it.
	LastHeartbeat time.Time `json:"last_heartbeat"`
}

// WaiterInfo describes one waiter.
type WaiterInfo struct {
	// Position is the waiter's place in the FIFO queue: 1 is promoted next.
	Position   int       `json:"position"`
	Identity   string    `json:"identity"`
	RemoteAddr string    `json:"remote_addr"`
	QueuedAt   time.Time `json:"queued_at"`
}

// LockList is the answer of GET /api/locks: a page of the held locks sorted
// by name. The list is an object rather than a bare array so that fields can
// be added beside it without breaking clients; Locks is [] when there are
// none.
type LockList struct {
	Locks []LockInfo `json:"locks"`
	// Total is how many held locks the filter matched, on every page.
	Total int `json:"total"`
	// Next is the cursor of the next page (pass it as after=), "" on the
	// last page. It is the name of the page's last lock.
	Next string `json:"next"`
}

// MaxPageSize bounds limit= on GET /api/locks.
const MaxPageSize = 1000

// ServerInfo is the answer of GET /api/info.
type ServerInfo struct {
	Version  string       `json:"version"`
	UptimeMS int64        `json:"uptime_ms"`
	Config   ServerConfig `json:"config"`
	Locks    int          `json:"locks"`    // locks with a holder
	Sessions int          `json:"sessions"` // open connections
	Waiters  int          `json:"waiters"`  // sessions queued behind a holder
	// Grants and Expiries count since the server started: fencing tokens
	// issued, and holders' leases that ran out without a heartbeat. Two
	// reads a known time apart give their rates.
	Grants   uint64 `json:"grants"`
	Expiries uint64 `json:"expiries"`
	// NewestToken is the last fencing token issued, 0 before the first; the
	// next holder of any lock gets a larger one.
	NewestToken uint64 `json:"newest_token"`
	// Ready is what /readyz answers; NotReady says why not ("" when ready).
	Ready    bool   `json:"ready"`
	NotReady string `json:"not_ready"`
	// HA is the node's place in its cluster when it runs with failover
	// through etcd (-ha-etcd); absent for a single server.
	HA *HAInfo `json:"ha,omitempty"`
}

// HAInfo is a node's place in a cluster led through etcd.
type HAInfo struct {
	// Role is "leader" from the election on (Serving says whether the new
	// leader's wait is over and the lock port open), else "follower".
	Role    string `json:"role"`
	Serving bool   `json:"serving"`
	// Leader is the leader's election value (its -ha-name), "" when none
	// is known.
	Leader  string `json:"leader"`
	Cluster string `json:"cluster"`
	TTLMS   int64  `json:"ttl_ms"`
	// Terms counts the terms this node has won since it started; while it
	// leads, the one in progress is the last of them.
	Terms uint64 `json:"terms"`
}

// ServerConfig is the server's effective configuration. Empty strings mean
// the feature is off.
type ServerConfig struct {
	Listen      string `json:"listen"`
	OpsListen   string `json:"ops_listen"`
	TLS         bool   `json:"tls"`
	MTLS        bool   `json:"mtls"`
	ACLFile     string `json:"acl_file"`
	AuditLog    string `json:"audit_log"` // a path, or "-" for stdout
	IOTimeoutMS int64  `json:"io_timeout_ms"`
}

// ReleaseResponse is the answer of a force-release: the lock and the token
// its holder lost.
type ReleaseResponse struct {
	Lock          string `json:"lock"`
	ReleasedToken uint64 `json:"released_token"`
}

// KickResponse is the answer of a kick: the lock and the remote address of
// the waiter removed from its queue.
type KickResponse struct {
	Lock   string `json:"lock"`
	Kicked string `json:"kicked"`
}

// ErrorResponse is the body of every error answer: what was wrong and what
// to do.
type ErrorResponse struct {
	Error string `json:"error"`
}

// The admin roles. Under mutual TLS on the admin port each call needs one,
// granted to the caller's certificate identity by the admin ACL; without
// mutual TLS every caller has all three.
const (
	RoleRead    = "read"    // the GET endpoints
	RoleRelease = "release" // POST /api/locks/{name}/release
	RoleKick    = "kick"    // DELETE /api/locks/{name}/waiters/{remote_addr}
)

// WhoAmI is the answer of GET /api/whoami, which needs no role: the caller's
// identity (its client certificate's, "" without mutual TLS) and the roles
// it has, in the order read, release, kick ([] when none).
type WhoAmI struct {
	Identity string   `json:"identity"`
	Roles    []string `json:"roles"`
}

// LockQuery selects a page of the held locks, in name order.
type LockQuery struct {
	// Match accepts the names to list; nil accepts every name. It is
	// called on the caller's goroutine, never on the loop.
	Match func(name string) bool
	// After skips the names up to and including it ("" skips none): the
	// Next of the previous page.
	After string
	// Limit bounds the locks of the page; 0 or less means no bound.
	Limit int
}

// Stats is a snapshot of the server's state.
type Stats struct {
	Sessions    int    // open connections
	Locks       int    // locks with a holder
	Waiters     int    // sessions queued behind a holder
	Timers      int    // armed timers
	Grants      uint64 // fencing tokens issued since start
	Expiries    uint64 // holders' leases run out since start
	NewestToken uint64 // the last token issued; 0 before the first
}
