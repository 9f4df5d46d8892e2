package eventloop

import "golang.org/x/sys/unix"

// sendQueue returns the bytes in fd's send queue that the peer has not
// acknowledged (SIOCOUTQ) and, when there are some, the bytes it has
// acknowledged in all (TCP_INFO); zeros on error.
func sendQueue(fd int) (queued int, acked uint64) {
	queued, err := unix.IoctlGetInt(fd, unix.SIOCOUTQ)
	if err != nil || queued == 0 {
		return 0, 0
	}
	info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil {
		return queued, 0
	}
	return queued, info.Bytes_acked
}
