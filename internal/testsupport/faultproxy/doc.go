// Package faultproxy is a TCP proxy that injects network faults between a
// monolock client and server, for tests and the chaos harness: it freezes
// traffic in either direction (a stand-in for a GC pause or a partition), adds
// latency, and cuts connections.
//
// Frozen bytes are held, not dropped: TCP does not lose data, so neither does
// a freeze; everything is delivered in order on thaw. An end of stream is held
// like data, so with both directions frozen (a partition) a close by either
// side stays hidden until thaw. With one direction frozen, a close can still
// surface through the other: data sent towards the closed side finds it gone,
// and the proxy then closes the whole connection.
//
// It is a test tool: each proxied connection costs one goroutine per direction.
package faultproxy
