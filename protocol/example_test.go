package protocol_test

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/monolock/monolock/protocol"
)

// A client validates its name and lease, encodes ACQUIRE, and reads the
// server's frames with read-full semantics: one read is not one frame. The
// bytes below are what a server sends to a client that waits, is promoted and
// is finally closed by an administrator; docs/protocol.md describes every
// field.
func Example() {
	name, lease := "nightly-import", 2*time.Second
	if err := protocol.ValidateName(name); err != nil {
		panic(err)
	}
	leaseMS, err := protocol.LeaseMS(lease)
	if err != nil {
		panic(err)
	}
	acquire := protocol.AppendAcquire(nil, leaseMS, name)
	fmt.Printf("ACQUIRE   % x\n", acquire)
	fmt.Printf("HEARTBEAT % x\n", protocol.AppendHeartbeat(nil))

	// The server's side of the conversation: WAITING, then a pushed
	// ACQUIRED, then ERROR 0x02.
	var wire []byte
	wire = protocol.AppendWaiting(wire)
	wire = protocol.AppendAcquired(wire, 1796083200<<32|1) // a grant at 2026-12-01T00:00:00Z
	wire = protocol.AppendError(wire, protocol.CodeClosedByAdmin, "closed by administrator")

	r := bytes.NewReader(wire)
	var buf protocol.FrameBuffer
	var f protocol.Frame
	for {
		if err := protocol.ReadServerFrame(r, &buf, &f); err != nil {
			fmt.Println("end:", err)
			break
		}
		switch f.Type {
		case protocol.TypeWaiting:
			fmt.Println("WAITING: queued; keep heartbeating, the grant is pushed")
		case protocol.TypeAcquired:
			fmt.Printf("ACQUIRED: token %d (0x%016x; second %d)\n", f.Token, f.Token, f.Token>>32)
		case protocol.TypeError:
			fmt.Printf("ERROR %s %q: retryable=%v\n", f.Code.Label(), f.Reason, f.Code.Retryable())
		}
	}

	// DecodeServer works on whatever is buffered: half a frame asks for more.
	n, err := protocol.DecodeServer(wire[1:5], &f)
	fmt.Println("half an ACQUIRED:", n, err)

	// A client's own mistakes fail before anything is sent.
	_, err = protocol.LeaseMS(0)
	fmt.Println(errors.Is(err, protocol.ErrInvalidLease), protocol.ErrInvalidLease.Code.Label())

	// Output:
	// ACQUIRE   01 01 00 00 07 d0 00 0e 6e 69 67 68 74 6c 79 2d 69 6d 70 6f 72 74
	// HEARTBEAT 02
	// WAITING: queued; keep heartbeating, the grant is pushed
	// ACQUIRED: token 7714118604895027201 (0x6b0e0e0000000001; second 1796083200)
	// ERROR 0x02 "closed by administrator": retryable=true
	// end: EOF
	// half an ACQUIRED: 0 <nil>
	// true 0x17
}

// DecodeClient is the server's side: it validates ACQUIRE field by field as
// the bytes arrive and reports the first violation with its canonical error.
func ExampleDecodeClient() {
	var f protocol.Frame
	for _, in := range [][]byte{
		protocol.AppendAcquire(nil, 2000, "deploy"),
		{0x01, 0x02},                               // version 2: refused after two bytes
		{0x01, 0x01, 0, 0, 0, 0},                   // lease_ms 0: refused after six bytes
		{0x01, 0x01, 0, 0, 0x07, 0xd0, 0x01, 0x2c}, // name_len 300: refused before any name byte
		{0x01, 0x01, 0, 0, 0x07, 0xd0},             // a header cut short: needs more
		{0x7f},
	} {
		n, err := protocol.DecodeClient(in, &f)
		var pe *protocol.Error
		switch {
		case errors.As(err, &pe):
			fmt.Printf("% x: ERROR %s %s\n", in, pe.Code.Label(), pe)
		case n == 0:
			fmt.Printf("% x: needs more bytes\n", in)
		default:
			fmt.Printf("% x: ACQUIRE lease_ms=%d name=%q (%d bytes)\n", in, f.LeaseMS, f.Name, n)
		}
	}
	// Output:
	// 01 01 00 00 07 d0 00 06 64 65 70 6c 6f 79: ACQUIRE lease_ms=2000 name="deploy" (14 bytes)
	// 01 02: ERROR 0x10 unsupported protocol version
	// 01 01 00 00 00 00: ERROR 0x17 lease must be positive
	// 01 01 00 00 07 d0 01 2c: ERROR 0x15 lock name too long
	// 01 01 00 00 07 d0: needs more bytes
	// 7f: ERROR 0x13 unknown message type
}
