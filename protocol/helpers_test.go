package protocol_test

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/monolock/monolock/protocol"
)

// hexBytes decodes hex written with optional spaces between groups, as in the
// golden file and in the tables of these tests.
func hexBytes(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

// cat concatenates byte slices into a new slice.
func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// diffFrame describes how got differs from want, comparing every field, or
// returns "" when they are equal. Name and Reason compare by content; a nil and
// an empty slice are equal.
func diffFrame(got, want protocol.Frame) string {
	var d []string
	if got.Type != want.Type {
		d = append(d, fmt.Sprintf("Type = 0x%02x, want 0x%02x", got.Type, want.Type))
	}
	if got.Version != want.Version {
		d = append(d, fmt.Sprintf("Version = %d, want %d", got.Version, want.Version))
	}
	if got.LeaseMS != want.LeaseMS {
		d = append(d, fmt.Sprintf("LeaseMS = %d, want %d", got.LeaseMS, want.LeaseMS))
	}
	if !bytes.Equal(got.Name, want.Name) {
		d = append(d, fmt.Sprintf("Name = %q, want %q", got.Name, want.Name))
	}
	if got.Token != want.Token {
		d = append(d, fmt.Sprintf("Token = %#016x, want %#016x", got.Token, want.Token))
	}
	if got.Code != want.Code {
		d = append(d, fmt.Sprintf("Code = 0x%02x, want 0x%02x", uint8(got.Code), uint8(want.Code)))
	}
	if !bytes.Equal(got.Reason, want.Reason) {
		d = append(d, fmt.Sprintf("Reason = %q, want %q", got.Reason, want.Reason))
	}
	return strings.Join(d, "; ")
}

// reencode encodes a decoded frame again with the Append functions, using only
// the fields that belong to its type. It reports false for a type that has no
// encoder.
func reencode(f *protocol.Frame) ([]byte, bool) {
	switch f.Type {
	case protocol.TypeAcquire:
		return protocol.AppendAcquire(nil, f.LeaseMS, string(f.Name)), true
	case protocol.TypeHeartbeat:
		return protocol.AppendHeartbeat(nil), true
	case protocol.TypeRelease:
		return protocol.AppendRelease(nil), true
	case protocol.TypeWaiting:
		return protocol.AppendWaiting(nil), true
	case protocol.TypeAcquired:
		return protocol.AppendAcquired(nil, f.Token), true
	case protocol.TypeError:
		return protocol.AppendError(nil, f.Code, string(f.Reason)), true
	}
	return nil, false
}
