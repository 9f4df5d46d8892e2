package protocol

// Version is the protocol version this package speaks. There is no negotiation.
const Version = 1

// Type is a frame's first byte.
type Type uint8

// Frame types. Client to server: Acquire, Heartbeat, Release. Server to
// client: Waiting, Acquired, Error.
const (
	TypeAcquire   Type = 0x01
	TypeHeartbeat Type = 0x02
	// TypeRelease ends the session: the server answers nothing and closes the
	// connection first, so the TIME_WAIT state stays on the server's fixed
	// port instead of costing the client an ephemeral port per release.
	TypeRelease  Type = 0x03
	TypeWaiting  Type = 0x11
	TypeAcquired Type = 0x12
	TypeError    Type = 0x13
)

// Frame sizes in bytes.
const (
	AcquireHeaderLen = 8 // type, version, lease_ms, name_len; the name follows
	HeartbeatLen     = 1
	ReleaseLen       = 1
	WaitingLen       = 1
	AcquiredLen      = 9 // type, token
	ErrorHeaderLen   = 3 // type, code, reason_len; the reason follows

	// MaxNameLen is the longest lock name in bytes. It is part of the protocol,
	// not a server setting, so every server accepts every name a client can build.
	MaxNameLen = 255
	// MaxReasonLen is the longest reason an ERROR frame can carry.
	MaxReasonLen = 255
	// MaxErrorLen is the longest ERROR frame.
	MaxErrorLen = ErrorHeaderLen + MaxReasonLen
)

// Frame is one decoded frame. Name and Reason alias the decoder's input and are
// valid only until that buffer changes; copy them to keep them.
type Frame struct {
	Type    Type
	Version uint8  // ACQUIRE
	LeaseMS uint32 // ACQUIRE
	Name    []byte // ACQUIRE
	Token   uint64 // ACQUIRED
	Code    Code   // ERROR
	Reason  []byte // ERROR
}
