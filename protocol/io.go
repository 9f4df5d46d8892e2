package protocol

import (
	"fmt"
	"io"
)

// FrameBuffer is scratch space large enough for any server frame.
type FrameBuffer [MaxErrorLen]byte

// ReadServerFrame reads exactly one server frame from r into f, with read-full
// semantics: it never assumes one read returns one frame. f.Reason aliases buf.
func ReadServerFrame(r io.Reader, buf *FrameBuffer, f *Frame) error {
	if _, err := io.ReadFull(r, buf[:1]); err != nil {
		return err
	}
	want := 0
	switch Type(buf[0]) {
	case TypeWaiting:
		want = WaitingLen
	case TypeAcquired:
		want = AcquiredLen
	case TypeError:
		if _, err := io.ReadFull(r, buf[1:ErrorHeaderLen]); err != nil {
			return unexpectedEOF(err)
		}
		want = ErrorHeaderLen + int(buf[2])
	default:
		return fmt.Errorf("%w: 0x%02x", ErrUnexpectedFrame, buf[0])
	}
	if want > 1 {
		from := 1
		if Type(buf[0]) == TypeError {
			from = ErrorHeaderLen
		}
		if _, err := io.ReadFull(r, buf[from:want]); err != nil {
			return unexpectedEOF(err)
		}
	}
	n, err := DecodeServer(buf[:want], f)
	if err != nil || n != want {
		return fmt.Errorf("decode server frame: %w", ErrUnexpectedFrame)
	}
	return nil
}

// unexpectedEOF turns a clean EOF inside a frame into io.ErrUnexpectedEOF.
func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
