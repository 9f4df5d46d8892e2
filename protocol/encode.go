package protocol

import (
	"encoding/binary"
)

// AppendAcquire appends an ACQUIRE frame. It does not validate; call
// ValidateName and LeaseMS first.
func AppendAcquire(dst []byte, leaseMS uint32, name string) []byte {
	dst = append(dst, byte(TypeAcquire), Version)
	dst = binary.BigEndian.AppendUint32(dst, leaseMS)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(name)))
	return append(dst, name...)
}

// AppendHeartbeat appends a HEARTBEAT frame.
func AppendHeartbeat(dst []byte) []byte { return append(dst, byte(TypeHeartbeat)) }

// AppendRelease appends a RELEASE frame.
func AppendRelease(dst []byte) []byte { return append(dst, byte(TypeRelease)) }

// AppendWaiting appends a WAITING frame.
func AppendWaiting(dst []byte) []byte { return append(dst, byte(TypeWaiting)) }

// AppendAcquired appends an ACQUIRED frame carrying token.
func AppendAcquired(dst []byte, token uint64) []byte {
	dst = append(dst, byte(TypeAcquired))
	return binary.BigEndian.AppendUint64(dst, token)
}

// AppendError appends an ERROR frame. A reason longer than MaxReasonLen is cut
// at a UTF-8 boundary so the frame stays valid.
func AppendError(dst []byte, code Code, reason string) []byte {
	reason = CutUTF8(reason, MaxReasonLen)
	dst = append(dst, byte(TypeError), byte(code), byte(len(reason)))
	return append(dst, reason...)
}
