package client

import (
	"errors"
	"strings"
	"testing"

	"github.com/monolock/monolock/protocol"
)

func TestServerErrorUnwrapsToCanonicalError(t *testing.T) {
	for _, code := range protocol.Codes() {
		var err error = &ServerError{Code: code, Reason: code.String() + ": detail"}
		if !errors.Is(err, code.Err()) {
			t.Errorf("0x%02x: errors.Is with the canonical error is false", uint8(code))
		}
		var se *ServerError
		if !errors.As(err, &se) || se.Retryable() != code.Retryable() {
			t.Errorf("0x%02x: Retryable = %v, want %v", uint8(code), se.Retryable(), code.Retryable())
		}
		if !strings.Contains(err.Error(), "detail") {
			t.Errorf("0x%02x: %q does not carry the reason", uint8(code), err)
		}
	}
	if !errors.Is(&ServerError{Code: protocol.CodeShuttingDown}, protocol.ErrShuttingDown) {
		t.Error("errors.Is(0x01, ErrShuttingDown) is false")
	}
}

func TestServerErrorUnknownCodeClassifiesByRange(t *testing.T) {
	for code, retryable := range map[protocol.Code]bool{0x05: true, 0x0f: true, 0x10: false, 0x42: false, 0xff: false} {
		err := &ServerError{Code: code}
		if err.Retryable() != retryable {
			t.Errorf("0x%02x: Retryable = %v, want %v", uint8(code), err.Retryable(), retryable)
		}
		if code.Err() == nil && err.Unwrap() != nil {
			t.Errorf("0x%02x: Unwrap = %v, want nil", uint8(code), err.Unwrap())
		}
		if code.Err() == nil && !strings.Contains(err.Error(), "unknown error code") {
			t.Errorf("0x%02x: empty reason should fall back to the code's text, got %q", uint8(code), err)
		}
	}
}
