package eventloop

import (
	"bytes"
	"crypto/tls"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"

	"github.com/monolock/monolock/protocol"
)

// A TLS connection is enrolled into the loop at accept, like a plain one, and
// is a session from then on: one io-timeout, counted from the accept, covers
// its handshake and its ACQUIRE. Its handshake goes through three phases.
//
//   - hello: the loop waits until the client's ClientHello has arrived whole.
//     Until then the connection costs what a silent plain one costs: a
//     descriptor, a session, a timer, and the bytes of a partial ClientHello
//     (at most maxHelloBuffered). No goroutine, no slot.
//   - handshake: crypto/tls cannot suspend a handshake and resume it later,
//     so the rest runs on a goroutine of its own. The loop copies the
//     client's later flights to it (bounds in handshakeinput.go) and
//     gnet writes what it sends. The goroutine holds a compute slot only
//     while it has input to work on: waiting for the client holds none, so
//     stalled clients never keep a well-behaved one waiting.
//   - open: the handshake is done; the session reads and writes records
//     through gnet's buffers (tls.go).
//
// A refused handshake (its alert sent) lingers a moment before it closes, so
// that the client reads the alert instead of a reset.

type tlsPhase uint8

const (
	phaseHello     tlsPhase = iota // waiting for the whole ClientHello, in the loop
	phaseHandshake                 // a goroutine runs the handshake
	phaseRefused                   // the handshake failed; the alert is out, input is dropped
	phaseOpen                      // established; records go through the loop
)

// Bounds on what a connection may make the server hold before its handshake
// is done.
const (
	// maxHelloMessage is the largest ClientHello accepted. Browsers with
	// post-quantum key shares send under 2 KiB; 16 KiB leaves room for long
	// cipher lists and session tickets.
	maxHelloMessage = 16 << 10
	// maxHelloBuffered bounds the bytes buffered before the ClientHello is
	// whole, record headers included (a hello cut into tiny records).
	maxHelloBuffered = 2 * maxHelloMessage
	// maxClientFlight bounds what a client sends after the server has
	// answered its ClientHello and before the handshake is done: its last
	// flight (with mutual TLS, the certificate chain, at most
	// certs.MaxClientChainBytes of DER, its CertificateVerify and its
	// Finished, about 3.3 KiB at the chain bound with an RSA-4096 leaf) and
	// the first requests a client may send with it. crypto/tls parses every
	// certificate of a chain before anything can refuse it, so this is what
	// bounds a forged chain's cost: at 8 KiB about a dozen certificates
	// instead of the hundred that its own 256 KiB limit lets through.
	maxClientFlight = 8 << 10
)

// handshakeTurn serves a TLS session whose handshake is not done; it runs
// on the loop, in OnTraffic, inside the owner's turn.
func (c *tlsConn) handshakeTurn(h *handler, s *session) gnet.Action {
	switch c.phase {
	case phaseHello:
		buf, _ := c.Conn.Peek(-1)
		arrived, err := helloArrived(buf)
		switch {
		case err != nil || (!arrived && len(buf) > maxHelloBuffered):
			h.debug(s, "closing a TLS client whose ClientHello is larger than the server accepts")
			return gnet.Close // OnClose counts the failed handshake
		case !arrived:
			return gnet.None // the partial hello stays in gnet's buffer
		case h.owner.refusing():
			return gnet.Close
		}
		c.tr.hs = newHandshakeInput(h.srv.handshakes, c.Conn.RemoteAddr())
		c.tr.hs.feed(buf)
		_, _ = c.Conn.Discard(len(buf))
		c.phase = phaseHandshake
		c.tls = tls.Server(&c.tr, h.srv.cfg.TLS)
		h.srv.handshakes.wg.Add(1)
		go h.srv.handshake(c)
	case phaseHandshake:
		rest, identity, done, err := c.tr.hs.result()
		if done && c.tr.asyncWrites.Load() > 0 {
			// The handshake has finished but its last flight (with mutual
			// TLS, the session ticket) is still in gnet's queue: the records
			// the session would write now must not overtake it. gnet writes
			// the queue before it runs the handshake's wake-up, whose
			// OnTraffic takes the client's bytes from gnet's buffer then.
			return gnet.None
		}
		if !done {
			buf, _ := c.Conn.Peek(-1)
			_, _ = c.Conn.Discard(len(buf))
			if !c.tr.hs.feed(buf) {
				h.debug(s, "closing a TLS client that sent more than its handshake needs")
				return gnet.Close // OnClose counts the failed handshake and stops the goroutine
			}
			return gnet.None
		}
		// The server's turns in the handshake stay out of the ACQUIRE's
		// io-timeout (timers.go).
		excused, _ := h.owner.serverTurns(s)
		s.since += excused
		c.tr.hs, c.tr.left = nil, nil
		if len(rest) > 0 { // keep the bytes, not the handshake's whole input buffer
			c.tr.left = bytes.Clone(rest)
		}
		if err != nil {
			return h.handshakeFailed(s, c, err)
		}
		c.phase, c.peerID = phaseOpen, identity
		c.tr.opened()
		if h.owner.refusing() { // told as shutdown (or a term's end) tells every session: effects of this turn
			reason, release := h.owner.refusalReason()
			h.owner.sendError(s, protocol.CodeShuttingDown, reason)
			h.owner.closeSession(s, release, "")
			return gnet.None
		}
		// Records that came with the handshake's last flight (a client that
		// sends ACQUIRE at once) are already inside crypto/tls or left over
		// from the handshake's input: no OnTraffic will announce them.
		h.owner.traffic(s)
	case phaseRefused:
		c.lingered += c.Conn.InboundBuffered()
		_, _ = c.Conn.Discard(-1)
		if c.lingered > lingerBytes {
			return gnet.Close
		}
	}
	return gnet.None
}

// A refused handshake ends with crypto/tls's alert ("certificate
// required", "bad certificate", …). The client's last flight, and maybe its
// first request, may still be unread then, and closing a socket over unread
// input resets the connection: a client that writes next sees "connection
// reset by peer" instead of the alert that says what was wrong. So the
// socket is shut for writing, after the alert, and its input read and
// dropped until the client closes, for at most lingerBytes and lingerTime,
// and never past io-timeout from the accept.
const (
	lingerBytes = 64 << 10
	lingerTime  = 250 * time.Millisecond
)

func (h *handler) debug(s *session, msg string) {
	if e := h.srv.log.Debug(); e.Enabled() {
		e.Str("remote", s.remoteAddr()).Msg(msg)
	}
}

// handshakeFailed counts and logs a handshake that crypto/tls refused, and
// lets the client read the alert it sent before the connection closes.
func (h *handler) handshakeFailed(s *session, c *tlsConn, err error) gnet.Action {
	h.srv.metrics.TLSHandshakeError()
	if e := h.srv.log.Debug(); e.Enabled() {
		e.Err(err).Str("remote", s.remoteAddr()).Msg("TLS handshake failed")
	}
	c.phase = phaseRefused
	if c.Conn.OutboundBuffered() > 0 || h.srv.handshakes.ctx.Err() != nil {
		return gnet.Close
	}
	if unix.Shutdown(c.Conn.Fd(), unix.SHUT_WR) != nil {
		return gnet.Close
	}
	_, _ = c.Conn.Discard(-1)
	h.owner.closeBy(s, h.owner.now+lingerTime)
	return gnet.None
}

// chainBound is the error of a TLS configuration (internal/certs') that
// refused a client's certificate chain for crossing one of its bounds,
// named for metrics and the log.
type chainBound interface {
	error
	ChainBound() string
}

// handshakeClosed runs in OnClose for a session whose handshake never
// finished: the goroutine, if any, stops waiting for input.
func (c *tlsConn) handshakeClosed(h *handler) {
	switch c.phase {
	case phaseHello:
		h.srv.metrics.TLSHandshakeError()
	case phaseHandshake:
		h.srv.metrics.TLSHandshakeError()
		c.tr.hs.close()
	}
}
