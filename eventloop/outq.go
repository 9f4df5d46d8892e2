package eventloop

// Output a peer does not read sits in two places: gnet's buffer, which
// OutboundBuffered counts, and the kernel's send queue, which the kernel
// grows up to net.ipv4.tcp_wmem's maximum (4 MiB by default) for a peer
// that does not read. The owner measures the kernel's share (SIOCOUTQ)
// every outputCheck bytes written and, while output is stalled, at every
// look of the stall timer, so that a peer that reads nothing is closed after
// io-timeout wherever its replies wait.
//
// The send buffer is left to the kernel rather than capped: SO_SNDBUF
// cannot be set above net.core.wmem_max (208 KiB by default), and a client
// that writes a burst of pipelined heartbeats before it reads the first
// answer needs the kernel to hold the answers meanwhile.

// outputCheck is how many bytes a session may write between two looks at
// its kernel send queue: a system call every few thousand replies.
const outputCheck = 8 << 10

// kernelQueuer is a conn that reports its kernel send queue itself (the
// owner's test fakes).
type kernelQueuer interface {
	kernelQueue() (queued int, acked uint64)
}

// fdConn is a conn on a socket: a gnet.Conn, or a tlsSession around one.
type fdConn interface{ Fd() int }

// kernelQueue returns how many bytes written to c the kernel holds because
// the peer has not acknowledged them, and, when that is not zero, how many
// bytes the peer has acknowledged since the connection opened. Zeros when it
// cannot be known.
func kernelQueue(c conn) (queued int, acked uint64) {
	switch c := c.(type) {
	case kernelQueuer:
		return c.kernelQueue()
	case fdConn:
		return sendQueue(c.Fd())
	}
	return 0, 0
}

// lookAtKernel measures the kernel's share of s's unread output, and
// whether the peer acknowledged anything since the last look: bytes in
// flight to a peer that reads are not a stall, bytes it never acknowledges
// are.
func (s *session) lookAtKernel() (queued int, progressed bool) {
	s.unchecked = 0
	queued, acked := kernelQueue(s.conn)
	if queued == 0 {
		return 0, true
	}
	// Only a change counts, so the low 32 bits do: the peer would have to
	// acknowledge exactly a multiple of 4 GiB between two looks to hide one.
	progressed = uint32(acked) != s.acked
	s.acked = uint32(acked)
	return queued, progressed
}
