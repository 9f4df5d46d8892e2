package eventloop

import (
	"fmt"
	"net"
	"os"
	"syscall"
)

// socketPair returns two connected stream sockets as net.Conns: the inner
// end for the loop to enroll, the outer one for the server to keep. The
// control connection uses it.
func socketPair() (inner, outer net.Conn, err error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socket pair: %w", err)
	}
	conns := make([]net.Conn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "monolock-socket-pair")
		conns[i], err = net.FileConn(f)
		_ = f.Close()
		if err != nil {
			for _, c := range conns[:i] {
				_ = c.Close()
			}
			if i == 0 {
				_ = syscall.Close(fds[1])
			}
			return nil, nil, fmt.Errorf("socket pair: %w", err)
		}
	}
	return conns[0], conns[1], nil
}
