package protocol_test

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"github.com/monolock/monolock/protocol"
)

// Longest frames: a needs-more answer is only possible below these lengths.
const (
	maxClientFrame = protocol.AcquireHeaderLen + protocol.MaxNameLen
	maxServerFrame = protocol.MaxErrorLen
)

// The committed corpus is in testdata/fuzz/<FuzzName>/; these seeds add every
// golden-style frame and its neighbours.
func addSeeds(f *testing.F) {
	seeds := [][]byte{
		{},
		protocol.AppendAcquire(nil, 2000, "nightly-import"),
		protocol.AppendAcquire(nil, 1, name255),
		protocol.AppendAcquire(nil, 30000, nameUTF),
		protocol.AppendHeartbeat(nil),
		protocol.AppendRelease(nil),
		protocol.AppendWaiting(nil),
		protocol.AppendAcquired(nil, 0x0000000100000002),
		protocol.AppendError(nil, protocol.CodeShuttingDown, "server shutting down"),
		protocol.AppendError(nil, protocol.CodeShuttingDown, reasonLong),
		cat(protocol.AppendAcquire(nil, 5, "x"), protocol.AppendHeartbeat(nil)),
		cat(protocol.AppendAcquire(nil, 5, "x"), protocol.AppendHeartbeat(nil), protocol.AppendRelease(nil)),
		cat(protocol.AppendAcquired(nil, 5), protocol.AppendWaiting(nil)),
	}
	for _, s := range seeds {
		f.Add(s)
	}
}

// splitLimit bounds the split points tried per input: a frame is never longer
// than limit, so splitting beyond it cannot change a decoder's answer.
func splitLimit(b []byte, limit int) int {
	return min(len(b), limit+1)
}

// checkDecode is the property shared by both decoders.
func checkDecode(t *testing.T, fname string, decode func([]byte, *protocol.Frame) (int, error), b []byte, maxFrame int, allowed []error) {
	orig := bytes.Clone(b)
	var f protocol.Frame
	n, err := decode(b, &f)
	if !bytes.Equal(b, orig) {
		t.Fatalf("%s modified its input", fname)
	}
	if n < 0 || n > len(b) || n > maxFrame {
		t.Fatalf("%s(%d bytes) = %d: out of bounds", fname, len(b), n)
	}
	if err != nil {
		if n != 0 {
			t.Fatalf("%s = %d, %v: an error must come with n = 0", fname, n, err)
		}
		ok := false
		for _, a := range allowed {
			ok = ok || err == a
		}
		if !ok {
			t.Fatalf("%s = %v, not one of %v", fname, err, allowed)
		}
		if protocol.Type(b[0]) != f.Type {
			t.Fatalf("%s error %v with f.Type 0x%02x, first byte 0x%02x", fname, err, f.Type, b[0])
		}
	}
	if n == 0 && err == nil && len(b) >= maxFrame {
		t.Fatalf("%s needs more after %d bytes; no frame is longer than %d", fname, len(b), maxFrame)
	}
	if n > 0 {
		re, ok := reencode(&f)
		if !ok {
			t.Fatalf("%s decoded type 0x%02x", fname, f.Type)
		}
		if !bytes.Equal(re, b[:n]) {
			t.Fatalf("re-encoding the decoded frame\n got % x\nwant % x", re, b[:n])
		}
	}

	// Two pieces: a receiver that has the first k bytes decodes them; if that
	// needs more, it receives the rest and decodes again. It must end where a
	// one-piece decode ends, and an early answer must already be the final one.
	for k := 0; k <= splitLimit(b, maxFrame); k++ {
		buf := make([]byte, k, len(b))
		copy(buf, b[:k])
		var g protocol.Frame
		n1, err1 := decode(buf, &g)
		if n1 == 0 && err1 == nil {
			buf = append(buf, b[k:]...)
			n1, err1 = decode(buf, &g)
		}
		if n1 != n || err1 != err {
			t.Fatalf("split at %d: %s = %d, %v; in one piece %d, %v", k, fname, n1, err1, n, err)
		}
		if n1 > 0 {
			if d := diffFrame(g, f); d != "" {
				t.Fatalf("split at %d: %s", k, d)
			}
		}
	}
}

func FuzzDecodeClient(f *testing.F) {
	addSeeds(f)
	allowed := []error{
		protocol.ErrUnsupportedVersion, protocol.ErrInvalidLease, protocol.ErrEmptyName,
		protocol.ErrNameTooLong, protocol.ErrInvalidUTF8, protocol.ErrUnknownMessageType,
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkDecode(t, "DecodeClient", protocol.DecodeClient, b, maxClientFrame, allowed)

		var fr protocol.Frame
		n, err := protocol.DecodeClient(b, &fr)
		if n > 0 && fr.Type == protocol.TypeAcquire {
			// A decoded ACQUIRE passes the client-side validation too.
			if fr.Version != protocol.Version || fr.LeaseMS == 0 {
				t.Fatalf("decoded ACQUIRE with version %d, lease %d", fr.Version, fr.LeaseMS)
			}
			if err := protocol.ValidateName(string(fr.Name)); err != nil {
				t.Fatalf("decoded name %q fails ValidateName: %v", fr.Name, err)
			}
		}
		if err == protocol.ErrNameTooLong {
			// Reported from the header alone: the same answer without any name byte.
			if n, err := protocol.DecodeClient(b[:protocol.AcquireHeaderLen], &fr); n != 0 || err != protocol.ErrNameTooLong {
				t.Fatalf("name_len > 255, header only: %d, %v", n, err)
			}
		}
	})
}

func FuzzDecodeServer(f *testing.F) {
	addSeeds(f)
	allowed := []error{protocol.ErrUnexpectedFrame}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkDecode(t, "DecodeServer", protocol.DecodeServer, b, maxServerFrame, allowed)

		// ReadServerFrame over the same bytes, one byte per read, agrees.
		var want protocol.Frame
		n, derr := protocol.DecodeServer(b, &want)
		src := bytes.NewReader(b)
		var buf protocol.FrameBuffer
		var got protocol.Frame
		rerr := protocol.ReadServerFrame(iotest.OneByteReader(src), &buf, &got)
		switch {
		case n > 0:
			if rerr != nil {
				t.Fatalf("DecodeServer = %d, ReadServerFrame = %v", n, rerr)
			}
			if d := diffFrame(got, want); d != "" {
				t.Fatalf("ReadServerFrame: %s", d)
			}
			if read := len(b) - src.Len(); read != n {
				t.Fatalf("ReadServerFrame read %d bytes, the frame has %d", read, n)
			}
		case derr != nil:
			if !errors.Is(rerr, derr) {
				t.Fatalf("DecodeServer = %v, ReadServerFrame = %v", derr, rerr)
			}
		case len(b) == 0:
			if rerr != io.EOF {
				t.Fatalf("ReadServerFrame(empty) = %v, want io.EOF", rerr)
			}
		default:
			if rerr != io.ErrUnexpectedEOF {
				t.Fatalf("ReadServerFrame(cut frame) = %v, want io.ErrUnexpectedEOF", rerr)
			}
		}
	})
}
