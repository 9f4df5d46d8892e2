package eventloop

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"

	"github.com/monolock/monolock/eventloop/certs"
)

// peer is what a TLS connection tells the owner about its client, since the
// connection the owner sees is the inner end of a socket pair.
type peer struct {
	remote   net.Addr
	identity string
}

// acceptTLS runs the handshake of one accepted connection, bounded by
// io-timeout, and then bridges it into the event loop. gnet has no TLS, so
// the plaintext travels through a socket pair: the loop's end is enrolled like
// any plain connection and the session behaves exactly alike on the wire;
// two goroutines copy between the TLS connection and the pair's other end.
func (s *Server) acceptTLS(conn net.Conn) {
	defer s.bridges.Done()
	tc := tls.Server(conn, s.cfg.TLS)
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.IOTimeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		s.metrics.TLSHandshakeError()
		s.log.Debug().Err(err).Stringer("remote", conn.RemoteAddr()).Msg("TLS handshake failed")
		_ = conn.Close()
		return
	}
	inner, outer, err := socketPair()
	if err != nil {
		s.metrics.AcceptError()
		s.log.Error().Err(err).Msg("cannot bridge a TLS connection into the event loop; closing it")
		_ = tc.Close()
		return
	}
	p := &peer{remote: conn.RemoteAddr(), identity: certs.Identity(tc.ConnectionState())}
	if _, err := s.engine.EnrollContext(inner, p); err != nil {
		s.metrics.AcceptError()
		s.log.Error().Err(err).Msg("cannot enroll a TLS connection; closing it")
		_ = outer.Close()
		_ = tc.Close()
		return
	}
	bridge(tc, outer)
}

// bridge copies both ways until either side ends, then closes both, so a
// close on either side reaches the other: a client's close releases its lock,
// the server's close ends the TLS connection.
func bridge(tc *tls.Conn, outer net.Conn) {
	var once sync.Once
	closeBoth := func() {
		once.Do(func() {
			_ = tc.Close()
			_ = outer.Close()
		})
	}
	done := make(chan struct{})
	go func() {
		copyFrames(outer, tc)
		closeBoth()
		close(done)
	}()
	copyFrames(tc, outer)
	closeBoth()
	<-done
}

// bridgeBuffer is each direction's copy buffer. Frames are at most a few
// hundred bytes, so a small buffer serves them; io.Copy's default 32 KiB per
// direction would make a TLS session cost 64 KiB more.
const bridgeBuffer = 1 << 10

// copyFrames copies until EOF or an error through a bridgeBuffer. The
// wrappers hide ReadFrom and WriteTo, which would bring their own buffers.
func copyFrames(dst io.Writer, src io.Reader) {
	buf := make([]byte, bridgeBuffer)
	_, _ = io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, buf)
}

// socketPair returns two connected stream sockets as net.Conns: the inner
// end for the loop to enroll, the outer one for the server to keep. The TLS
// bridge and the control connection both use it.
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
