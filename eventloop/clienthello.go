package eventloop

import (
	"encoding/binary"
	"errors"
)

// TLS record and handshake message framing, as far as the hello phase reads it.
const (
	recordTypeHandshake = 22
	maxRecordPlaintext  = 16 << 10
	typeClientHello     = 1
	handshakeHeaderLen  = 4
)

// helloArrived reports whether buf, the first bytes the client sent, holds
// its whole ClientHello. It also reports true for input that is not a TLS
// handshake at all, so that crypto/tls answers it as it does any bad
// handshake; errHelloTooLarge for a ClientHello beyond maxHelloMessage.
func helloArrived(buf []byte) (bool, error) {
	var (
		header [handshakeHeaderLen]byte
		got    int // handshake bytes seen
		need   = -1
	)
	for pos := 0; ; {
		if len(buf)-pos < recordHeaderLen {
			return false, nil
		}
		h := buf[pos : pos+recordHeaderLen]
		n := int(binary.BigEndian.Uint16(h[3:]))
		if h[0] != recordTypeHandshake || h[1] != 3 || n == 0 || n > maxRecordPlaintext {
			return true, nil // not a TLS handshake: crypto/tls says what is wrong
		}
		pos += recordHeaderLen
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
			if need > handshakeHeaderLen+maxHelloMessage {
				return false, errHelloTooLarge
			}
		}
		if got >= need {
			return true, nil
		}
	}
}

var errHelloTooLarge = errors.New("ClientHello larger than the server accepts")
