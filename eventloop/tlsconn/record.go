package tlsconn

import (
	"bytes"
	"encoding/binary"
	"errors"
)

// TLS record and handshake message framing, as far as this package reads it:
// the client's ClientHello, to know when it has arrived whole, and the
// server's first handshake message, to know whether it asks for a second
// ClientHello.
const (
	// RecordHeaderLen is the length of a TLS record header: type, version
	// and a two-byte length, which is the last thing in it.
	RecordHeaderLen     = 5
	recordTypeHandshake = 22
	maxRecordPlaintext  = 16 << 10
	typeClientHello     = 1
	typeServerHello     = 2
	handshakeHeaderLen  = 4
)

// Bounds on what a connection may make the server hold before its
// handshake is done.
const (
	// MaxHelloMessage is the largest ClientHello accepted. Browsers with
	// post-quantum key shares send under 2 KiB; 16 KiB leaves room for long
	// cipher lists and session tickets.
	MaxHelloMessage = 16 << 10
	// MaxHelloBuffered bounds the bytes buffered before the ClientHello is
	// whole, record headers included (a hello cut into tiny records).
	MaxHelloBuffered = 2 * MaxHelloMessage
	// MaxClientFlight bounds what a client sends after the server has
	// answered its ClientHello and before the handshake is done: its last
	// flight (with mutual TLS, the certificate chain, at most
	// certs.MaxClientChainBytes of DER, its CertificateVerify and its
	// Finished, about 3.3 KiB at the chain bound with an RSA-4096 leaf) and
	// the first requests a client may send with it. crypto/tls parses every
	// certificate of a chain before anything can refuse it, so this is what
	// bounds a forged chain's cost: at 8 KiB about a dozen certificates
	// instead of the hundred that its own 256 KiB limit lets through.
	MaxClientFlight = 8 << 10
)

// ErrHelloTooLarge is a ClientHello that declares more than MaxHelloMessage.
var ErrHelloTooLarge = errors.New("ClientHello larger than the server accepts; send a shorter one (fewer cipher suites, key shares or tickets)")

// HelloArrived reports whether buf, the first bytes the client sent, holds
// its whole ClientHello. It also reports true for input that is not a TLS
// handshake at all, so that crypto/tls answers it as it does any bad
// handshake; ErrHelloTooLarge for a ClientHello beyond MaxHelloMessage.
func HelloArrived(buf []byte) (bool, error) {
	var (
		header [handshakeHeaderLen]byte
		got    int // handshake bytes seen
		need   = -1
	)
	for pos := 0; ; {
		if len(buf)-pos < RecordHeaderLen {
			return false, nil
		}
		h := buf[pos : pos+RecordHeaderLen]
		n := int(binary.BigEndian.Uint16(h[3:]))
		if h[0] != recordTypeHandshake || h[1] != 3 || n == 0 || n > maxRecordPlaintext {
			return true, nil // not a TLS handshake: crypto/tls says what is wrong
		}
		pos += RecordHeaderLen
		if len(buf)-pos < n {
			return false, nil
		}
		for i := 0; i < n && got+i < handshakeHeaderLen; i++ {
			header[got+i] = buf[pos+i]
		}
		got += n
		pos += n
		if got < handshakeHeaderLen {
			continue
		}
		if need < 0 {
			if header[0] != typeClientHello {
				return true, nil
			}
			need = handshakeHeaderLen + int(header[1])<<16 | int(header[2])<<8 | int(header[3])
			if need > handshakeHeaderLen+MaxHelloMessage {
				return false, ErrHelloTooLarge
			}
		}
		if got >= need {
			return true, nil
		}
	}
}

// helloRetryRandom is SHA-256("HelloRetryRequest"): the random of a
// ServerHello that is a HelloRetryRequest (RFC 8446, section 4.1.3).
var helloRetryRandom = [32]byte{
	0xCF, 0x21, 0xAD, 0x74, 0xE5, 0x9A, 0x61, 0x11, 0xBE, 0x1D, 0x8C, 0x02, 0x1E, 0x65, 0xB8, 0x91,
	0xC2, 0xA2, 0x11, 0x16, 0x7A, 0xBB, 0x8C, 0x5E, 0x07, 0x9E, 0x09, 0xE2, 0xC8, 0xA8, 0x33, 0x9C,
}

// serverHelloPrefix is what of a ServerHello tells a HelloRetryRequest
// apart: the message header, the legacy version (2 bytes) and the random.
const serverHelloPrefix = handshakeHeaderLen + 2 + len(helloRetryRandom)

// IsHelloRetryRequest reports whether the record p begins is a
// HelloRetryRequest, read as ServerMessages reads the server's output.
func IsHelloRetryRequest(p []byte) bool {
	var m ServerMessages
	answered, retry := m.Write(p)
	return answered && retry
}

// ServerMessages reads the server's handshake output as a stream of records
// and, inside its handshake records, of handshake messages, whatever pieces
// crypto/tls writes them in and however a message is cut into records. It
// says when the server has answered a ClientHello, and whether the answer
// asks for a second one: a HelloRetryRequest, a ServerHello whose random is
// helloRetryRandom. Any other handshake message of the server's answers the
// ClientHello; other records (change_cipher_spec, encrypted ones) say
// nothing.
type ServerMessages struct {
	header     [RecordHeaderLen]byte
	headerHave int
	recordLeft int // body bytes of the current record not read yet

	msg     [serverHelloPrefix]byte // the current handshake message's start
	msgHave int                     // bytes of msg read
	msgLeft int                     // body bytes of the message not read yet, once its header is
}

// Write reads the next bytes the server sends. answered reports that they
// complete an answer to a ClientHello, retry that the last such answer is
// a HelloRetryRequest.
func (m *ServerMessages) Write(p []byte) (answered, retry bool) {
	for len(p) > 0 {
		if m.recordLeft == 0 {
			n := copy(m.header[m.headerHave:], p)
			m.headerHave += n
			p = p[n:]
			if m.headerHave == RecordHeaderLen {
				m.headerHave = 0
				m.recordLeft = int(binary.BigEndian.Uint16(m.header[3:]))
			}
			continue
		}
		n := min(len(p), m.recordLeft)
		if m.header[0] == recordTypeHandshake {
			if a, r := m.messages(p[:n]); a {
				answered, retry = true, r
			}
		}
		m.recordLeft -= n
		p = p[n:]
	}
	return answered, retry
}

// messages reads the body of a handshake record.
func (m *ServerMessages) messages(p []byte) (answered, retry bool) {
	for len(p) > 0 {
		if m.msgHave < handshakeHeaderLen {
			n := copy(m.msg[m.msgHave:handshakeHeaderLen], p)
			m.msgHave += n
			p = p[n:]
			if m.msgHave < handshakeHeaderLen {
				break
			}
			m.msgLeft = int(m.msg[1])<<16 | int(m.msg[2])<<8 | int(m.msg[3])
			if m.msg[0] != typeServerHello {
				answered, retry = true, false
			}
		}
		n := min(len(p), m.msgLeft)
		if m.msg[0] == typeServerHello && m.msgHave < serverHelloPrefix {
			k := copy(m.msg[m.msgHave:], p[:n])
			m.msgHave += k
			if m.msgHave == serverHelloPrefix {
				answered, retry = true, bytes.Equal(m.msg[handshakeHeaderLen+2:], helloRetryRandom[:])
			}
		}
		m.msgLeft -= n
		p = p[n:]
		if m.msgLeft == 0 {
			if m.msg[0] == typeServerHello && m.msgHave < serverHelloPrefix {
				answered, retry = true, false // too short to be a HelloRetryRequest
			}
			m.msgHave = 0
		}
	}
	return answered, retry
}
