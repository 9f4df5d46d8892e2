package protocol_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/monolock/monolock/protocol"
)

// readerKinds wrap a stream the ways a TCP connection can deliver it.
var readerKinds = []struct {
	name string
	wrap func(io.Reader) io.Reader
}{
	{"whole", func(r io.Reader) io.Reader { return r }},
	{"onebyte", iotest.OneByteReader},
	{"half", iotest.HalfReader},
	{"dataerr", iotest.DataErrReader}, // the last data arrives together with io.EOF
}

// Every frame of a stream, read one call at a time, however the reader splits
// it; after the last frame, io.EOF.
func TestReadServerFrameStream(t *testing.T) {
	stream, frames := serverStream()
	for _, k := range readerKinds {
		t.Run(k.name, func(t *testing.T) {
			src := bytes.NewReader(stream)
			r := k.wrap(src)
			var buf protocol.FrameBuffer
			var f protocol.Frame
			consumed := 0
			for i, sf := range frames {
				if err := protocol.ReadServerFrame(r, &buf, &f); err != nil {
					t.Fatalf("frame %d: %v", i, err)
				}
				if d := diffFrame(f, sf.want); d != "" {
					t.Errorf("frame %d: %s", i, d)
				}
				consumed += sf.n
				if k.name == "onebyte" && len(stream)-src.Len() != consumed {
					// Read-exactly: never a byte of the next frame.
					t.Errorf("frame %d: read %d bytes of the stream, want %d", i, len(stream)-src.Len(), consumed)
				}
			}
			if err := protocol.ReadServerFrame(r, &buf, &f); err != io.EOF {
				t.Errorf("after the last frame: %v, want io.EOF", err)
			}
		})
	}
}

// A stream cut at any byte: io.EOF when the cut falls between frames,
// io.ErrUnexpectedEOF when it falls inside one.
func TestReadServerFrameTruncated(t *testing.T) {
	stream, frames := serverStream()
	boundary := map[int]bool{0: true}
	at := 0
	for _, sf := range frames {
		at += sf.n
		boundary[at] = true
	}
	for _, k := range readerKinds {
		for cut := 0; cut < len(stream); cut++ {
			r := k.wrap(bytes.NewReader(stream[:cut]))
			var buf protocol.FrameBuffer
			var f protocol.Frame
			read, offset := 0, 0
			var err error
			for {
				if err = protocol.ReadServerFrame(r, &buf, &f); err != nil {
					break
				}
				offset += frames[read].n
				read++
			}
			if offset > cut {
				t.Fatalf("%s, cut at %d: read frames up to byte %d", k.name, cut, offset)
			}
			want := io.ErrUnexpectedEOF
			if boundary[cut] {
				want = io.EOF
			}
			if err != want {
				t.Errorf("%s, cut at %d (after %d whole frames): %v, want %v", k.name, cut, read, err, want)
			}
			if boundary[cut] && offset != cut || !boundary[cut] && offset+frames[read].n <= cut {
				t.Errorf("%s, cut at %d: stopped after %d frames (byte %d)", k.name, cut, read, offset)
			}
		}
	}
}

func TestReadServerFrameUnexpectedType(t *testing.T) {
	for _, b := range []byte{0x00, 0x01, 0x02, 0x10, 0x14, 0x7f, 0xff} {
		var buf protocol.FrameBuffer
		var f protocol.Frame
		r := bytes.NewReader([]byte{b, 0x11, 0x11})
		err := protocol.ReadServerFrame(r, &buf, &f)
		if !errors.Is(err, protocol.ErrUnexpectedFrame) {
			t.Errorf("first byte 0x%02x: %v, want ErrUnexpectedFrame", b, err)
			continue
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("0x%02x", b)) {
			t.Errorf("first byte 0x%02x: error %q does not name the byte", b, err)
		}
		if r.Len() != 2 {
			t.Errorf("first byte 0x%02x: read %d bytes, want only the first", b, 3-r.Len())
		}
	}
}

// A read error other than EOF is returned as it is, at any point in a frame.
func TestReadServerFrameReadError(t *testing.T) {
	errBoom := errors.New("boom")
	frame := protocol.AppendError(nil, protocol.CodeNameTooLong, "lock name too long")
	for cut := 0; cut < len(frame); cut++ {
		r := io.MultiReader(bytes.NewReader(frame[:cut]), iotest.ErrReader(errBoom))
		var buf protocol.FrameBuffer
		var f protocol.Frame
		if err := protocol.ReadServerFrame(r, &buf, &f); !errors.Is(err, errBoom) {
			t.Errorf("error after %d bytes: got %v, want %v", cut, err, errBoom)
		}
	}
	r := iotest.TimeoutReader(bytes.NewReader(cat(protocol.AppendAcquired(nil, 3), protocol.AppendAcquired(nil, 4))))
	var buf protocol.FrameBuffer
	var f protocol.Frame
	// TimeoutReader answers its first Read and fails the second.
	if err := protocol.ReadServerFrame(iotest.OneByteReader(r), &buf, &f); !errors.Is(err, iotest.ErrTimeout) {
		t.Errorf("timeout inside a frame: %v, want iotest.ErrTimeout", err)
	}
}

// f.Reason aliases buf, as documented: no copy, no allocation.
func TestReadServerFrameReasonAliasesBuffer(t *testing.T) {
	var buf protocol.FrameBuffer
	var f protocol.Frame
	r := bytes.NewReader(protocol.AppendError(nil, protocol.CodeEmptyName, "empty lock name"))
	if err := protocol.ReadServerFrame(r, &buf, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Reason) == 0 || &f.Reason[0] != &buf[protocol.ErrorHeaderLen] {
		t.Errorf("f.Reason does not alias buf[%d:]", protocol.ErrorHeaderLen)
	}
	if string(f.Reason) != "empty lock name" {
		t.Errorf("f.Reason = %q", f.Reason)
	}
}

// The longest ERROR exactly fills a FrameBuffer.
func TestReadServerFrameLongestError(t *testing.T) {
	frame := protocol.AppendError(nil, protocol.CodeNotAuthorized, strings.Repeat("r", 300))
	if len(frame) != protocol.MaxErrorLen {
		t.Fatalf("longest ERROR is %d bytes, want %d", len(frame), protocol.MaxErrorLen)
	}
	var buf protocol.FrameBuffer
	var f protocol.Frame
	if err := protocol.ReadServerFrame(iotest.HalfReader(bytes.NewReader(frame)), &buf, &f); err != nil {
		t.Fatal(err)
	}
	want := protocol.Frame{Type: protocol.TypeError, Code: protocol.CodeNotAuthorized, Reason: []byte(strings.Repeat("r", 255))}
	if d := diffFrame(f, want); d != "" {
		t.Error(d)
	}
}
