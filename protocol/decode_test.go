package protocol_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/monolock/monolock/protocol"
)

// The frame layouts of protocol.md, counted by hand.
func TestFrameSizes(t *testing.T) {
	sizes := []struct {
		name      string
		got, want int
	}{
		{"AcquireHeaderLen", protocol.AcquireHeaderLen, 1 + 1 + 4 + 2},
		{"HeartbeatLen", protocol.HeartbeatLen, 1},
		{"ReleaseLen", protocol.ReleaseLen, 1},
		{"WaitingLen", protocol.WaitingLen, 1},
		{"AcquiredLen", protocol.AcquiredLen, 1 + 8},
		{"ErrorHeaderLen", protocol.ErrorHeaderLen, 1 + 1 + 1},
		{"MaxNameLen", protocol.MaxNameLen, 255},
		{"MaxReasonLen", protocol.MaxReasonLen, 255},
		{"MaxErrorLen", protocol.MaxErrorLen, 3 + 255},
		{"len(FrameBuffer)", len(protocol.FrameBuffer{}), 3 + 255},
		{"len(AppendAcquire(name of 5))", len(protocol.AppendAcquire(nil, 1, "abcde")), 8 + 5},
		{"len(AppendHeartbeat)", len(protocol.AppendHeartbeat(nil)), 1},
		{"len(AppendRelease)", len(protocol.AppendRelease(nil)), 1},
		{"len(AppendWaiting)", len(protocol.AppendWaiting(nil)), 1},
		{"len(AppendAcquired)", len(protocol.AppendAcquired(nil, 7)), 9},
		{"len(AppendError(reason of 4))", len(protocol.AppendError(nil, 0x10, "abcd")), 3 + 4},
	}
	for _, s := range sizes {
		if s.got != s.want {
			t.Errorf("%s = %d, want %d", s.name, s.got, s.want)
		}
	}
	if protocol.Version != 1 {
		t.Errorf("Version = %d, want 1", protocol.Version)
	}
	types := map[protocol.Type]byte{
		protocol.TypeAcquire: 0x01, protocol.TypeHeartbeat: 0x02, protocol.TypeRelease: 0x03,
		protocol.TypeWaiting: 0x11, protocol.TypeAcquired: 0x12, protocol.TypeError: 0x13,
	}
	for typ, want := range types {
		if byte(typ) != want {
			t.Errorf("type 0x%02x, want 0x%02x", byte(typ), want)
		}
	}
}

type decodeCase struct {
	name    string
	in      string // hex, spaces ignored
	wantN   int
	wantErr error // compared with ==: the decoders return the canonical values themselves
	want    protocol.Frame
	check   func(t *testing.T, f protocol.Frame) // on failure; nil checks the whole frame when n > 0
}

// acq builds an ACQUIRE in hex from its fields, in the table's notation.
func acq(version uint8, leaseMS uint32, nameLen uint16, name string) string {
	return fmt.Sprintf("01 %02x %08x %04x %x", version, leaseMS, nameLen, name)
}

func typeIs(want protocol.Type) func(*testing.T, protocol.Frame) {
	return func(t *testing.T, f protocol.Frame) {
		t.Helper()
		if f.Type != want {
			t.Errorf("f.Type = 0x%02x, want 0x%02x", f.Type, want)
		}
	}
}

func TestDecodeClient(t *testing.T) {
	nightly := hexBytes(t, acq(1, 2000, 14, "nightly-import"))
	long := strings.Repeat("z", 255)
	cases := []decodeCase{
		{name: "empty input", in: ""},

		// HEARTBEAT
		{name: "heartbeat", in: "02", wantN: 1, want: protocol.Frame{Type: protocol.TypeHeartbeat}},
		{name: "heartbeat then more", in: "02 02 01 01", wantN: 1, want: protocol.Frame{Type: protocol.TypeHeartbeat}},
		{name: "release", in: "03", wantN: 1, want: protocol.Frame{Type: protocol.TypeRelease}},
		{name: "release then more", in: "03 02 7f", wantN: 1, want: protocol.Frame{Type: protocol.TypeRelease}},

		// ACQUIRE, valid
		{name: "acquire", in: acq(1, 2000, 14, "nightly-import") + " 02", wantN: len(nightly),
			want: protocol.Frame{Type: protocol.TypeAcquire, Version: 1, LeaseMS: 2000, Name: []byte("nightly-import")}},
		{name: "acquire lease 1 name 1 byte", in: acq(1, 1, 1, "a"), wantN: 9,
			want: protocol.Frame{Type: protocol.TypeAcquire, Version: 1, LeaseMS: 1, Name: []byte("a")}},
		{name: "acquire lease max", in: acq(1, 0xffffffff, 1, "a"), wantN: 9,
			want: protocol.Frame{Type: protocol.TypeAcquire, Version: 1, LeaseMS: 0xffffffff, Name: []byte("a")}},
		{name: "acquire name 255", in: acq(1, 5, 255, long), wantN: 8 + 255,
			want: protocol.Frame{Type: protocol.TypeAcquire, Version: 1, LeaseMS: 5, Name: []byte(long)}},
		{name: "acquire name kept raw", in: acq(1, 5, 8, " Lock\t\x00 "), wantN: 16,
			want: protocol.Frame{Type: protocol.TypeAcquire, Version: 1, LeaseMS: 5, Name: []byte(" Lock\t\x00 ")}},
		{name: "acquire name utf8", in: acq(1, 5, 19, nameUTF), wantN: 8 + 19,
			want: protocol.Frame{Type: protocol.TypeAcquire, Version: 1, LeaseMS: 5, Name: []byte(nameUTF)}},

		// Rule 1: version, reported as soon as byte 2 arrives.
		{name: "version 2 after 2 bytes", in: "01 02", wantErr: protocol.ErrUnsupportedVersion,
			check: func(t *testing.T, f protocol.Frame) {
				if f.Type != protocol.TypeAcquire || f.Version != 2 {
					t.Errorf("f.Type, f.Version = 0x%02x, %d; want 0x01, 2", f.Type, f.Version)
				}
			}},
		{name: "version 0", in: "01 00", wantErr: protocol.ErrUnsupportedVersion, check: typeIs(protocol.TypeAcquire)},
		{name: "version 255", in: "01 ff", wantErr: protocol.ErrUnsupportedVersion, check: typeIs(protocol.TypeAcquire)},
		{name: "version 2 beats lease 0", in: acq(2, 0, 0, ""), wantErr: protocol.ErrUnsupportedVersion},
		{name: "version 2 full frame", in: acq(2, 2000, 1, "a"), wantErr: protocol.ErrUnsupportedVersion},
		{name: "version 1 needs more", in: "01 01"},
		{name: "type only needs more", in: "01"},

		// Rule 2: lease, reported after 6 bytes.
		{name: "lease 0 after 6 bytes", in: "01 01 00000000", wantErr: protocol.ErrInvalidLease,
			check: func(t *testing.T, f protocol.Frame) {
				if f.Type != protocol.TypeAcquire || f.Version != 1 || f.LeaseMS != 0 {
					t.Errorf("f = %+v, want Type ACQUIRE, Version 1, LeaseMS 0", f)
				}
			}},
		{name: "lease 5 bytes needs more", in: "01 01 000000"},
		{name: "lease 0 prefix of 5 bytes needs more", in: "01 01 00 00 00"},
		{name: "lease 0 beats empty name", in: acq(1, 0, 0, ""), wantErr: protocol.ErrInvalidLease},
		{name: "lease 0 beats long name", in: acq(1, 0, 300, ""), wantErr: protocol.ErrInvalidLease},
		{name: "lease 0 beats bad utf8", in: acq(1, 0, 1, "\xff"), wantErr: protocol.ErrInvalidLease},

		// Rule 3: name_len 0, reported after the 8-byte header.
		{name: "name_len 0 after 8 bytes", in: acq(1, 2000, 0, ""), wantErr: protocol.ErrEmptyName},
		{name: "name_len 0 followed by more", in: acq(1, 2000, 0, "") + " 02 02", wantErr: protocol.ErrEmptyName},
		{name: "header 7 bytes needs more", in: "01 01 000007d0 00"},

		// Rule 4: name_len > 255, reported after the header without any name byte.
		{name: "name_len 256 header only", in: acq(1, 2000, 256, ""), wantErr: protocol.ErrNameTooLong},
		{name: "name_len 300 header only", in: acq(1, 2000, 300, ""), wantErr: protocol.ErrNameTooLong},
		{name: "name_len 65535 header only", in: acq(1, 2000, 65535, ""), wantErr: protocol.ErrNameTooLong},
		{name: "name_len 256 beats bad utf8", in: acq(1, 2000, 256, "\xff\xfe"), wantErr: protocol.ErrNameTooLong},
		{name: "name_len 255 header only needs more", in: acq(1, 2000, 255, "")},
		{name: "name_len 255 with 254 bytes needs more", in: acq(1, 2000, 255, long[:254])},

		// Rule 5: UTF-8, checked once the whole name is there.
		{name: "utf8 ff", in: acq(1, 2000, 1, "\xff"), wantErr: protocol.ErrInvalidUTF8},
		{name: "utf8 bad continuation", in: acq(1, 2000, 2, "\xc3\x28"), wantErr: protocol.ErrInvalidUTF8},
		{name: "utf8 overlong", in: acq(1, 2000, 2, "\xc0\xaf"), wantErr: protocol.ErrInvalidUTF8},
		{name: "utf8 surrogate", in: acq(1, 2000, 3, "\xed\xa0\x80"), wantErr: protocol.ErrInvalidUTF8},
		{name: "utf8 cut rune at end", in: acq(1, 2000, 3, "a\xe6\x97"), wantErr: protocol.ErrInvalidUTF8},
		{name: "utf8 255 bytes bad last", in: acq(1, 2000, 255, long[:254]+"\x80"), wantErr: protocol.ErrInvalidUTF8},
		{name: "utf8 rune cut by name_len", in: acq(1, 2000, 2, "a\xe6") + " 97a5", wantErr: protocol.ErrInvalidUTF8},
		{name: "bad utf8 incomplete needs more", in: acq(1, 2000, 3, "\xff")},

		// Unknown first byte: reported at once, with the byte in f.Type.
		{name: "type 0x00", in: "00", wantErr: protocol.ErrUnknownMessageType, check: typeIs(0x00)},
		{name: "type 0x04", in: "04", wantErr: protocol.ErrUnknownMessageType, check: typeIs(0x04)},
		{name: "type 0x7f", in: "7f 01 01", wantErr: protocol.ErrUnknownMessageType, check: typeIs(0x7f)},
		{name: "type 0xff", in: "ff", wantErr: protocol.ErrUnknownMessageType, check: typeIs(0xff)},
		{name: "server type WAITING", in: "11", wantErr: protocol.ErrUnknownMessageType, check: typeIs(0x11)},
		{name: "server type ACQUIRED", in: "12 0000000000000001", wantErr: protocol.ErrUnknownMessageType, check: typeIs(0x12)},
		{name: "server type ERROR", in: "13 01 00", wantErr: protocol.ErrUnknownMessageType, check: typeIs(0x13)},
	}
	runDecodeCases(t, "DecodeClient", protocol.DecodeClient, cases)
}

func runDecodeCases(t *testing.T, fname string, decode func([]byte, *protocol.Frame) (int, error), cases []decodeCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := hexBytes(t, c.in)
			orig := bytes.Clone(in)
			var f protocol.Frame
			n, err := decode(in, &f)
			if n != c.wantN || err != c.wantErr {
				t.Fatalf("%s(% x) = %d, %v; want %d, %v", fname, in, n, err, c.wantN, c.wantErr)
			}
			if !bytes.Equal(in, orig) {
				t.Errorf("%s modified its input", fname)
			}
			switch {
			case c.check != nil:
				c.check(t, f)
			case n > 0:
				if d := diffFrame(f, c.want); d != "" {
					t.Errorf("%s: %s", fname, d)
				}
			}
		})
	}
}

// Every strict prefix of a valid frame needs more; the whole frame decodes.
func TestDecodeClientPrefixes(t *testing.T) {
	frames := map[string][]byte{
		"acquire":      protocol.AppendAcquire(nil, 2000, "nightly-import"),
		"acquire-255":  protocol.AppendAcquire(nil, 1, name255),
		"acquire-utf8": protocol.AppendAcquire(nil, 30000, nameUTF),
		"heartbeat":    protocol.AppendHeartbeat(nil),
		"release":      protocol.AppendRelease(nil),
	}
	for name, frame := range frames {
		t.Run(name, func(t *testing.T) {
			checkPrefixes(t, "DecodeClient", protocol.DecodeClient, frame)
		})
	}
}

func checkPrefixes(t *testing.T, fname string, decode func([]byte, *protocol.Frame) (int, error), frame []byte) {
	t.Helper()
	var f protocol.Frame
	for k := 0; k < len(frame); k++ {
		// A copy with no spare capacity, so a read past the prefix would panic.
		prefix := bytes.Clone(frame[:k])
		if n, err := decode(prefix[:k:k], &f); n != 0 || err != nil {
			t.Fatalf("%s(first %d of %d bytes) = %d, %v; want 0, nil", fname, k, len(frame), n, err)
		}
	}
	if n, err := decode(frame, &f); n != len(frame) || err != nil {
		t.Fatalf("%s(whole frame) = %d, %v; want %d, nil", fname, n, err, len(frame))
	}
}

// streamFrame is one frame of a test stream: its length and what it decodes to.
type streamFrame struct {
	n    int
	want protocol.Frame
}

func clientStream() ([]byte, []streamFrame) {
	parts := []struct {
		b    []byte
		want protocol.Frame
	}{
		{protocol.AppendAcquire(nil, 2000, "nightly-import"),
			protocol.Frame{Type: protocol.TypeAcquire, Version: 1, LeaseMS: 2000, Name: []byte("nightly-import")}},
		{protocol.AppendHeartbeat(nil), protocol.Frame{Type: protocol.TypeHeartbeat}},
		{protocol.AppendHeartbeat(nil), protocol.Frame{Type: protocol.TypeHeartbeat}},
		{protocol.AppendAcquire(nil, 7, nameUTF),
			protocol.Frame{Type: protocol.TypeAcquire, Version: 1, LeaseMS: 7, Name: []byte(nameUTF)}},
		{protocol.AppendAcquire(nil, 1, name255),
			protocol.Frame{Type: protocol.TypeAcquire, Version: 1, LeaseMS: 1, Name: []byte(name255)}},
		{protocol.AppendHeartbeat(nil), protocol.Frame{Type: protocol.TypeHeartbeat}},
		{protocol.AppendRelease(nil), protocol.Frame{Type: protocol.TypeRelease}},
	}
	var stream []byte
	var frames []streamFrame
	for _, p := range parts {
		stream = append(stream, p.b...)
		frames = append(frames, streamFrame{len(p.b), p.want})
	}
	return stream, frames
}

// Several frames in one buffer decode one after another.
func TestDecodeClientConcatenated(t *testing.T) {
	stream, frames := clientStream()
	checkConcatenated(t, "DecodeClient", protocol.DecodeClient, stream, frames)
}

func checkConcatenated(t *testing.T, fname string, decode func([]byte, *protocol.Frame) (int, error), stream []byte, frames []streamFrame) {
	t.Helper()
	rest := stream
	for i, sf := range frames {
		var f protocol.Frame // fresh, so every field is checked
		n, err := decode(rest, &f)
		if n != sf.n || err != nil {
			t.Fatalf("frame %d: %s = %d, %v; want %d, nil", i, fname, n, err, sf.n)
		}
		if d := diffFrame(f, sf.want); d != "" {
			t.Errorf("frame %d: %s", i, d)
		}
		rest = rest[n:]
	}
	var f protocol.Frame
	if n, err := decode(rest, &f); len(rest) != 0 || n != 0 || err != nil {
		t.Errorf("after the last frame: %d bytes left, %s = %d, %v; want 0 bytes, 0, nil", len(rest), fname, n, err)
	}
}

// A receiver whose buffer grows one byte at a time, as a slow TCP stream would
// deliver it, sees each frame complete exactly when its last byte arrives.
func TestDecodeClientByteByByte(t *testing.T) {
	stream, frames := clientStream()
	checkByteByByte(t, "DecodeClient", protocol.DecodeClient, stream, frames)
}

func checkByteByByte(t *testing.T, fname string, decode func([]byte, *protocol.Frame) (int, error), stream []byte, frames []streamFrame) {
	t.Helper()
	var (
		buf      []byte // what the receiver holds and has not consumed
		f        protocol.Frame
		got      int // frames decoded so far
		consumed int // stream offset of buf[0]
	)
	for i := 0; i < len(stream); i++ {
		buf = append(buf, stream[i])
		n, err := decode(buf, &f)
		if err != nil {
			t.Fatalf("after byte %d: %s = %d, %v", i, fname, n, err)
		}
		if n == 0 {
			if got < len(frames) && consumed+frames[got].n == i+1 {
				t.Fatalf("frame %d complete at byte %d, but %s needs more", got, i, fname)
			}
			continue
		}
		if got >= len(frames) {
			t.Fatalf("unexpected extra frame at byte %d", i)
		}
		if n != frames[got].n || consumed+n != i+1 {
			t.Fatalf("frame %d: n = %d at byte %d, want %d ending at byte %d", got, n, i, frames[got].n, consumed+frames[got].n-1)
		}
		if d := diffFrame(f, frames[got].want); d != "" {
			t.Errorf("frame %d: %s", got, d)
		}
		buf = buf[n:]
		consumed += n
		got++
	}
	if got != len(frames) || len(buf) != 0 {
		t.Errorf("decoded %d frames with %d bytes left, want %d frames and none left", got, len(buf), len(frames))
	}
}

func TestDecodeServer(t *testing.T) {
	cases := []decodeCase{
		{name: "empty input", in: ""},
		{name: "waiting", in: "11", wantN: 1, want: protocol.Frame{Type: protocol.TypeWaiting}},
		{name: "waiting then more", in: "11 12", wantN: 1, want: protocol.Frame{Type: protocol.TypeWaiting}},

		{name: "acquired", in: "12 0000000100000002", wantN: 9,
			want: protocol.Frame{Type: protocol.TypeAcquired, Token: 0x0000000100000002}},
		{name: "acquired big endian", in: "12 0102030405060708 11", wantN: 9,
			want: protocol.Frame{Type: protocol.TypeAcquired, Token: 0x0102030405060708}},
		{name: "acquired token 0", in: "12 0000000000000000", wantN: 9,
			want: protocol.Frame{Type: protocol.TypeAcquired}},
		{name: "acquired token max", in: "12 ffffffffffffffff", wantN: 9,
			want: protocol.Frame{Type: protocol.TypeAcquired, Token: 1<<64 - 1}},
		{name: "acquired 8 bytes needs more", in: "12 00000001000000"},

		{name: "error", in: "13 15 04 6c6f6e67", wantN: 7,
			want: protocol.Frame{Type: protocol.TypeError, Code: 0x15, Reason: []byte("long")}},
		{name: "error empty reason", in: "13 01 00 11", wantN: 3,
			want: protocol.Frame{Type: protocol.TypeError, Code: protocol.CodeShuttingDown}},
		{name: "error unknown code kept", in: "13 99 01 21", wantN: 4,
			want: protocol.Frame{Type: protocol.TypeError, Code: 0x99, Reason: []byte("!")}},
		{name: "error code 0", in: "13 00 00", wantN: 3,
			want: protocol.Frame{Type: protocol.TypeError, Code: 0}},
		{name: "error reason 255", in: "13 10 ff " + fmt.Sprintf("%x", name255), wantN: 258,
			want: protocol.Frame{Type: protocol.TypeError, Code: 0x10, Reason: []byte(name255)}},
		// The reason is for people and never parsed, so its bytes pass through.
		{name: "error reason not utf8 passes", in: "13 10 02 fffe", wantN: 5,
			want: protocol.Frame{Type: protocol.TypeError, Code: 0x10, Reason: []byte("\xff\xfe")}},
		{name: "error type only needs more", in: "13"},
		{name: "error header cut needs more", in: "13 15"},
		{name: "error reason cut needs more", in: "13 15 04 6c6f6e"},
		{name: "error reason 255 cut needs more", in: "13 10 ff " + fmt.Sprintf("%x", name255[:254])},

		{name: "type 0x00", in: "00", wantErr: protocol.ErrUnexpectedFrame, check: typeIs(0x00)},
		{name: "client type ACQUIRE", in: "01 01", wantErr: protocol.ErrUnexpectedFrame, check: typeIs(0x01)},
		{name: "client type HEARTBEAT", in: "02", wantErr: protocol.ErrUnexpectedFrame, check: typeIs(0x02)},
		{name: "type 0x10", in: "10", wantErr: protocol.ErrUnexpectedFrame, check: typeIs(0x10)},
		{name: "type 0x14", in: "14", wantErr: protocol.ErrUnexpectedFrame, check: typeIs(0x14)},
		{name: "type 0x7f", in: "7f", wantErr: protocol.ErrUnexpectedFrame, check: typeIs(0x7f)},
		{name: "type 0xff", in: "ff 11", wantErr: protocol.ErrUnexpectedFrame, check: typeIs(0xff)},
	}
	runDecodeCases(t, "DecodeServer", protocol.DecodeServer, cases)
}

func TestDecodeServerPrefixes(t *testing.T) {
	frames := map[string][]byte{
		"waiting":            protocol.AppendWaiting(nil),
		"acquired":           protocol.AppendAcquired(nil, 0x0000000100000002),
		"error":              protocol.AppendError(nil, protocol.CodeNameTooLong, "lock name too long"),
		"error-empty-reason": protocol.AppendError(nil, protocol.CodeShuttingDown, ""),
		"error-long-reason":  protocol.AppendError(nil, protocol.CodeShuttingDown, strings.Repeat("é", 200)),
	}
	for name, frame := range frames {
		t.Run(name, func(t *testing.T) {
			checkPrefixes(t, "DecodeServer", protocol.DecodeServer, frame)
		})
	}
}

func serverStream() ([]byte, []streamFrame) {
	parts := []struct {
		b    []byte
		want protocol.Frame
	}{
		{protocol.AppendWaiting(nil), protocol.Frame{Type: protocol.TypeWaiting}},
		{protocol.AppendWaiting(nil), protocol.Frame{Type: protocol.TypeWaiting}},
		{protocol.AppendAcquired(nil, 42), protocol.Frame{Type: protocol.TypeAcquired, Token: 42}},
		{protocol.AppendError(nil, protocol.CodeShuttingDown, ""),
			protocol.Frame{Type: protocol.TypeError, Code: protocol.CodeShuttingDown}},
		{protocol.AppendAcquired(nil, 1<<64-1), protocol.Frame{Type: protocol.TypeAcquired, Token: 1<<64 - 1}},
		{protocol.AppendError(nil, protocol.CodeDuplicateAcquire, "duplicate ACQUIRE"),
			protocol.Frame{Type: protocol.TypeError, Code: protocol.CodeDuplicateAcquire, Reason: []byte("duplicate ACQUIRE")}},
		{protocol.AppendError(nil, protocol.CodeShuttingDown, reasonLong),
			protocol.Frame{Type: protocol.TypeError, Code: protocol.CodeShuttingDown, Reason: []byte(reasonLongCut)}},
		{protocol.AppendWaiting(nil), protocol.Frame{Type: protocol.TypeWaiting}},
	}
	var stream []byte
	var frames []streamFrame
	for _, p := range parts {
		stream = append(stream, p.b...)
		frames = append(frames, streamFrame{len(p.b), p.want})
	}
	return stream, frames
}

func TestDecodeServerConcatenated(t *testing.T) {
	stream, frames := serverStream()
	checkConcatenated(t, "DecodeServer", protocol.DecodeServer, stream, frames)
}

func TestDecodeServerByteByByte(t *testing.T) {
	stream, frames := serverStream()
	checkByteByByte(t, "DecodeServer", protocol.DecodeServer, stream, frames)
}

// AppendError cuts an over-long reason at a UTF-8 boundary at or before 255
// bytes, for every rune width and every alignment.
func TestAppendErrorTruncation(t *testing.T) {
	cases := []struct {
		name   string
		reason string
		want   string
	}{
		{"255 ascii kept", strings.Repeat("x", 255), strings.Repeat("x", 255)},
		{"256 ascii cut to 255", strings.Repeat("x", 256), strings.Repeat("x", 255)},
		{"2-byte rune across 255", strings.Repeat("x", 254) + "é", strings.Repeat("x", 254)},
		{"2-byte rune ends at 255", strings.Repeat("x", 253) + "éé", strings.Repeat("x", 253) + "é"},
		{"3-byte rune across 255, 1 in", strings.Repeat("x", 254) + "日", strings.Repeat("x", 254)},
		{"3-byte rune across 255, 2 in", strings.Repeat("x", 253) + "日x", strings.Repeat("x", 253)},
		{"3-byte runes aligned", strings.Repeat("日", 100), strings.Repeat("日", 85)},
		{"4-byte rune across 255, 3 in", strings.Repeat("x", 252) + "🔒", strings.Repeat("x", 252)},
		{"4-byte runes", strings.Repeat("🔒", 70), strings.Repeat("🔒", 63)},
		{"2-byte runes", strings.Repeat("é", 200), strings.Repeat("é", 127)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			frame := protocol.AppendError(nil, protocol.CodeInvalidUTF8, c.reason)
			want := cat([]byte{0x13, 0x16, byte(len(c.want))}, []byte(c.want))
			if !bytes.Equal(frame, want) {
				t.Fatalf("AppendError cut the reason to %d bytes, want %d", len(frame)-3, len(c.want))
			}
			var f protocol.Frame
			if n, err := protocol.DecodeServer(frame, &f); n != len(frame) || err != nil {
				t.Fatalf("DecodeServer = %d, %v", n, err)
			}
			if string(f.Reason) != c.want {
				t.Errorf("decoded reason %q, want %q", f.Reason, c.want)
			}
		})
	}
}

// A Frame reused across calls, as a server or client loop does, holds only the
// fields of the frame just decoded: nothing of an earlier frame survives.
func TestDecodeClearsEarlierFrame(t *testing.T) {
	dirty := protocol.Frame{
		Type: 0x7e, Version: 9, LeaseMS: 99, Name: []byte("old"),
		Token: 99, Code: 0x99, Reason: []byte("old"),
	}
	client, server := protocol.DecodeClient, protocol.DecodeServer
	cases := []struct {
		fname   string
		decode  func([]byte, *protocol.Frame) (int, error)
		in      []byte
		wantErr error
		want    protocol.Frame
	}{
		{"DecodeClient", client, protocol.AppendHeartbeat(nil), nil,
			protocol.Frame{Type: protocol.TypeHeartbeat}},
		{"DecodeClient", client, protocol.AppendRelease(nil), nil,
			protocol.Frame{Type: protocol.TypeRelease}},
		{"DecodeClient", client, protocol.AppendAcquire(nil, 5, "n"), nil,
			protocol.Frame{Type: protocol.TypeAcquire, Version: 1, LeaseMS: 5, Name: []byte("n")}},
		{"DecodeClient", client, []byte{0x01, 0x01, 0, 0, 0, 0}, protocol.ErrInvalidLease,
			protocol.Frame{Type: protocol.TypeAcquire, Version: 1}},
		{"DecodeClient", client, []byte{0x42}, protocol.ErrUnknownMessageType,
			protocol.Frame{Type: 0x42}},
		{"DecodeServer", server, protocol.AppendWaiting(nil), nil,
			protocol.Frame{Type: protocol.TypeWaiting}},
		{"DecodeServer", server, protocol.AppendAcquired(nil, 1), nil,
			protocol.Frame{Type: protocol.TypeAcquired, Token: 1}},
		{"DecodeServer", server, protocol.AppendError(nil, 0x10, ""), nil,
			protocol.Frame{Type: protocol.TypeError, Code: 0x10}},
	}
	for _, c := range cases {
		f := dirty
		if _, err := c.decode(c.in, &f); err != c.wantErr {
			t.Fatalf("%s(% x) = %v, want %v", c.fname, c.in, err, c.wantErr)
		}
		if d := diffFrame(f, c.want); d != "" {
			t.Errorf("%s(% x) into a used Frame: %s", c.fname, c.in, d)
		}
	}
}
