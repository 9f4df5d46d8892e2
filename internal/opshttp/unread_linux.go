package opshttp

import (
	"net"

	"golang.org/x/sys/unix"
)

// unread reports whether bytes from the peer wait in c's receive queue
// (SIOCINQ); false when it cannot tell.
func unread(c net.Conn) bool {
	n := 0
	return withFD(c, func(fd int) (err error) {
		n, err = unix.IoctlGetInt(fd, unix.SIOCINQ)
		return err
	}) && n > 0
}
