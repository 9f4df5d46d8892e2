package main

// The addresses of the pair are those of deploy/keepalived/keepalived.conf,
// all in 192.0.2.0/24 (TEST-NET-1, never routed).
const (
	addrA      = "192.0.2.11"
	addrB      = "192.0.2.12"
	addrClient = "192.0.2.20"
	vip        = "192.0.2.70"
	protoPort  = "7070"
	prefixLen  = "/24"
	// hostIface is the interface name inside every host namespace; it is
	// the one the shipped keepalived.conf names.
	hostIface = "eth0"
)
