package protocol

import (
	"encoding/binary"
	"errors"
	"unicode/utf8"
)

// ErrUnexpectedFrame is returned by DecodeServer and ReadServerFrame for a first
// byte that is not a server frame type. A client that sees it must close.
var ErrUnexpectedFrame = errors.New("protocol: unexpected frame type from server")

// DecodeClient decodes the client frame at the start of b, working on whatever
// is buffered. It returns one of:
//
//   - n > 0, nil: f holds one complete frame of n bytes;
//   - 0, nil: b holds only the beginning of a frame; call again with more bytes;
//   - 0, a canonical *Error: b breaks the protocol; the server answers with that
//     error's code and closes. For ErrUnknownMessageType, f.Type is the byte.
//
// ACQUIRE is validated in field order and each field as soon as it has arrived:
// a foreign version after two bytes, a zero lease after six, an empty or too
// long name after eight (never waiting for the name bytes), then the name's
// UTF-8. DecodeClient does not allocate.
func DecodeClient(b []byte, f *Frame) (n int, err error) {
	if len(b) == 0 {
		return 0, nil
	}
	*f = Frame{Type: Type(b[0])} // no field of an earlier frame survives
	switch f.Type {
	case TypeHeartbeat:
		return HeartbeatLen, nil
	case TypeRelease:
		return ReleaseLen, nil
	case TypeAcquire:
		return decodeAcquire(b, f)
	default:
		return 0, ErrUnknownMessageType
	}
}

func decodeAcquire(b []byte, f *Frame) (int, error) {
	if len(b) < 2 {
		return 0, nil
	}
	f.Version = b[1]
	if f.Version != Version {
		return 0, ErrUnsupportedVersion
	}
	if len(b) < 6 {
		return 0, nil
	}
	f.LeaseMS = binary.BigEndian.Uint32(b[2:6])
	if f.LeaseMS == 0 {
		return 0, ErrInvalidLease
	}
	if len(b) < AcquireHeaderLen {
		return 0, nil
	}
	nameLen := int(binary.BigEndian.Uint16(b[6:AcquireHeaderLen]))
	switch {
	case nameLen == 0:
		return 0, ErrEmptyName
	case nameLen > MaxNameLen:
		return 0, ErrNameTooLong
	}
	end := AcquireHeaderLen + nameLen
	if len(b) < end {
		return 0, nil
	}
	f.Name = b[AcquireHeaderLen:end]
	if !utf8.Valid(f.Name) {
		return 0, ErrInvalidUTF8
	}
	return end, nil
}

// DecodeServer decodes the server frame at the start of b with the same
// contract as DecodeClient; the only violation is ErrUnexpectedFrame.
func DecodeServer(b []byte, f *Frame) (n int, err error) {
	if len(b) == 0 {
		return 0, nil
	}
	*f = Frame{Type: Type(b[0])} // no field of an earlier frame survives
	switch f.Type {
	case TypeWaiting:
		return WaitingLen, nil
	case TypeAcquired:
		if len(b) < AcquiredLen {
			return 0, nil
		}
		f.Token = binary.BigEndian.Uint64(b[1:AcquiredLen])
		return AcquiredLen, nil
	case TypeError:
		if len(b) < ErrorHeaderLen {
			return 0, nil
		}
		end := ErrorHeaderLen + int(b[2])
		if len(b) < end {
			return 0, nil
		}
		f.Code = Code(b[1])
		f.Reason = b[ErrorHeaderLen:end]
		return end, nil
	default:
		return 0, ErrUnexpectedFrame
	}
}
