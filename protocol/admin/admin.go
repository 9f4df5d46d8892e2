// Package admin declares the JSON bodies of monolock's admin HTTP API, once
// for both sides: the server (internal/adminhttp) encodes them and
// monolockctl decodes them. It depends on the standard library only, so a
// client can import it without the server.
//
//	GET    /api/whoami                                WhoAmI
//	GET    /api/info                                  ServerInfo
//	GET    /api/locks[?match=GLOB]                    LockList
//	GET    /api/locks/{name}                          LockInfo
//	POST   /api/locks/{name}/release                  ReleaseResponse
//	DELETE /api/locks/{name}/waiters/{remote_addr}    KickResponse
//
// Every error answer is an ErrorResponse. A call the caller has no role for
// is answered 403, saying which role is missing and how to grant it.
//
// Tokens are uint64 values up to about 2^62: decode them into integers, not
// floating point, or they lose their low bits.
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
}

// WaiterInfo describes one waiter.
type WaiterInfo struct {
	Identity   string    `json:"identity"`
	RemoteAddr string    `json:"remote_addr"`
	QueuedAt   time.Time `json:"queued_at"`
}

// LockList is the answer of GET /api/locks: the held locks sorted by name.
// The list is an object rather than a bare array so that fields can be added
// beside it without breaking clients; Locks is [] when there are none.
type LockList struct {
	Locks []LockInfo `json:"locks"`
}

// ServerInfo is the answer of GET /api/info.
type ServerInfo struct {
	Version  string       `json:"version"`
	UptimeMS int64        `json:"uptime_ms"`
	Config   ServerConfig `json:"config"`
	Locks    int          `json:"locks"`    // locks with a holder
	Sessions int          `json:"sessions"` // open connections
	Waiters  int          `json:"waiters"`  // sessions queued behind a holder
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
