// Package failkit is what the failover harnesses share (bench/failover, the
// keepalived pair; bench/failover-etcd, the nodes elected through etcd): a
// small LAN of network namespaces, the client process that takes locks and
// writes to a fenced resource, the events it writes, the grants of the
// servers' audit logs, and the verdicts read off them. The harnesses differ
// only in how they run the servers and which faults they inject.
package failkit
