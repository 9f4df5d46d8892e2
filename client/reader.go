package client

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/monolock/monolock/protocol"
)

// inbound is one event from the reader: a WAITING or ACQUIRED frame, or the
// error that ended the session (an ERROR frame becomes a *ServerError).
type inbound struct {
	typ   protocol.Type
	token uint64
	at    time.Time // when the read that completed the frame returned (the RTT, the order of deadlines)
	err   error     // the session's end
	// more: the same read brought another whole frame (or an unknown type
	// byte), which follows at once.
	more bool
	// final: the reader has stopped. After an ERROR it goes on reading to the
	// server's close, so that a client that released sees that close and
	// closes second (no TIME_WAIT on its side).
	final bool
}

// readBufferSize holds several server frames, so a burst costs one read call.
const readBufferSize = 512

// readFrames is the connection's permanent reader (client rule 1): the server
// pushes a promotion without being asked, so something must always be reading.
// It reads whole frames (rule 2) and hands them to the session goroutine until
// the connection fails or stop is closed.
func readFrames(conn net.Conn, out chan<- inbound, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	stamped := &stampedReader{conn: conn}
	r := bufio.NewReaderSize(stamped, readBufferSize)
	var buf protocol.FrameBuffer
	var f protocol.Frame
	for {
		in := inbound{}
		if err := protocol.ReadServerFrame(r, &buf, &f); err != nil {
			in.err, in.final = readError(err), true
		} else if f.Type == protocol.TypeError {
			in.err = &ServerError{Code: f.Code, Reason: string(f.Reason)}
		} else {
			in.typ, in.token = f.Type, f.Token
		}
		in.at = stamped.at
		in.more = !in.final && wholeFrameBuffered(r)
		select {
		case out <- in:
		case <-stop:
			return
		}
		if in.final {
			return
		}
	}
}

// stampedReader notes when each read returned: the frames it completes were
// read then, whenever they are decoded.
type stampedReader struct {
	conn net.Conn
	at   time.Time
}

func (s *stampedReader) Read(p []byte) (int, error) {
	n, err := s.conn.Read(p)
	s.at = time.Now()
	return n, err
}

// wholeFrameBuffered reports whether r holds a whole server frame, or a type
// byte no frame has, without reading: it came with the read just decoded.
func wholeFrameBuffered(r *bufio.Reader) bool {
	n := r.Buffered()
	if n == 0 {
		return false
	}
	b, _ := r.Peek(n)
	var next protocol.Frame
	k, err := protocol.DecodeServer(b, &next)
	return k > 0 || err != nil
}

// errServerClosed is the server's end of stream: it closed first.
var errServerClosed = errors.New("closed by the server")

// errConnectionClosedByServer is what an end of stream reads as; it ends
// every released lock, so it is made once instead of on each read.
var errConnectionClosedByServer = fmt.Errorf("%w: %w", ErrConnectionClosed, errServerClosed)

// readError classifies a failed read: garbage from the server is a protocol
// violation, a TLS alert from the server a refusal, anything else a lost
// connection.
func readError(err error) error {
	if err == io.EOF {
		return errConnectionClosedByServer
	}
	if errors.Is(err, protocol.ErrUnexpectedFrame) {
		return fmt.Errorf("%w: %v", ErrProtocolViolation, err)
	}
	if refused := tlsRefusal(err); refused != nil {
		return refused
	}
	return fmt.Errorf("%w: %v", ErrConnectionClosed, err)
}

// tlsRefusal is err as ErrTLSRefused when it is a TLS alert from the server,
// nil otherwise. crypto/tls reports the peer's alert as a *net.OpError with
// Op "remote error" (its alert type is unexported), during the handshake
// (TLS 1.2 refusing the client's certificate) and on a later read (TLS 1.3);
// a close_notify is io.EOF.
func tlsRefusal(err error) error {
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "remote error" {
		return fmt.Errorf("%w: %v (is the client certificate expired, signed by a CA the server does not trust, or missing?)", ErrTLSRefused, err)
	}
	return nil
}
