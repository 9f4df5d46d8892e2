package opshttp

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// unread reports whether bytes from the peer wait in c's receive queue
// (SIOCINQ); false when it cannot tell.
func unread(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	n := 0
	if rc.Control(func(fd uintptr) { n, err = unix.IoctlGetInt(int(fd), unix.SIOCINQ) }) != nil || err != nil {
		return false
	}
	return n > 0
}
