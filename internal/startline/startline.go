// Package startline names the parts of monolock's start line: the JSON log
// line the server writes once every listener is bound and its event loop
// runs. It is the readiness contract between the server (cmd/monolock),
// which writes the line, and every test and harness that starts the binary
// (internal/testsupport/proc), which reads it; both take the names from
// here, so neither can change them alone.
//
// With -log-format json the line is
//
//	{"level":"info","version":"…","listen":"127.0.0.1:40123","ops_listen":"127.0.0.1:40124","admin_listen":"127.0.0.1:40125",…,"message":"monolock started"}
//
// where the addresses are the bound ones (port 0 resolved) and ops_listen
// and admin_listen appear only when those ports are on. A connection made
// after the line is accepted and served; with an ops port, /readyz answering
// 200 completes readiness.
package startline

// Message is the start line's "message".
const Message = "monolock started"

// The start line's fields that readers rely on.
const (
	// Version is the server's version.
	Version = "version"
	// Listen is the bound protocol address.
	Listen = "listen"
	// OpsListen is the bound ops (metrics, probes) address; absent when off.
	OpsListen = "ops_listen"
	// AdminListen is the bound admin API address; absent when off.
	AdminListen = "admin_listen"
	// HTTPMaxConns is the connection cap of each HTTP port; present when
	// one is on.
	HTTPMaxConns = "http_max_conns"
	// HACluster is the cluster's name of a node with failover through etcd
	// (-ha-cluster); absent for a single server. Such a node starts as a
	// follower, its lock port closed: Listen is where it will listen while
	// it leads.
	HACluster = "ha_cluster"
)
