// Package protocol is monolock's wire protocol, version 1: frame layouts, error
// codes with their canonical texts, validation of names and leases, and
// allocation-free encoding and incremental decoding of every frame in both
// directions.
//
// It is the one package shared by the server, the Go client and anyone writing a
// client in another language. docs/protocol.md is the contract in prose (every
// frame, the validation order, the error codes and retry rules, the session,
// heartbeats and fencing tokens); protocol/testdata/golden.txt holds golden
// byte vectors for every frame. The package performs no I/O beyond the
// io.Reader helpers in io.go.
//
// Client to server:
//
//	ACQUIRE    0x01 · version u8 · lease_ms u32 · name_len u16 · name
//	HEARTBEAT  0x02
//	RELEASE    0x03
//
// Server to client:
//
//	WAITING    0x11
//	ACQUIRED   0x12 · token u64
//	ERROR      0x13 · code u8 · reason_len u8 · reason
//
// All integers are big endian.
package protocol
