package protocol_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/monolock/monolock/protocol"
)

// Each code of protocol.md: its text, its exported error, its class.
func TestCodesCanonical(t *testing.T) {
	for _, c := range canonicalTexts {
		if got := c.code.String(); got != c.text {
			t.Errorf("Code(0x%02x).String() = %q, want %q", uint8(c.code), got, c.text)
		}
		if got := c.code.Err(); got != c.err {
			t.Errorf("Code(0x%02x).Err() = %v (%p), want the exported value %p", uint8(c.code), got, got, c.err)
		}
		if c.err.Code != c.code {
			t.Errorf("%v has Code 0x%02x, want 0x%02x", c.err, uint8(c.err.Code), uint8(c.code))
		}
		if got := c.err.Error(); got != c.text {
			t.Errorf("Error() = %q, want %q", got, c.text)
		}
		wantRetry := c.code < 0x10
		if c.code.Retryable() != wantRetry || c.err.Retryable() != wantRetry {
			t.Errorf("code 0x%02x: Retryable() = %v, %v; want %v", uint8(c.code), c.code.Retryable(), c.err.Retryable(), wantRetry)
		}
	}

	named := map[protocol.Code]protocol.Code{
		protocol.CodeShuttingDown: 0x01, protocol.CodeClosedByAdmin: 0x02,
		protocol.CodeUnsupportedVersion: 0x10, protocol.CodeFirstMessageNotAcquire: 0x11,
		protocol.CodeDuplicateAcquire: 0x12, protocol.CodeUnknownMessageType: 0x13,
		protocol.CodeEmptyName: 0x14, protocol.CodeNameTooLong: 0x15,
		protocol.CodeInvalidUTF8: 0x16, protocol.CodeInvalidLease: 0x17,
		protocol.CodeNotAuthorized: 0x18,
	}
	if len(named) != len(canonicalTexts) {
		t.Errorf("the Code constants are not distinct")
	}
	for got, want := range named {
		if got != want {
			t.Errorf("code constant 0x%02x, want 0x%02x", uint8(got), uint8(want))
		}
	}
}

func TestCodesList(t *testing.T) {
	codes := protocol.Codes()
	if len(codes) != len(canonicalTexts) {
		t.Fatalf("Codes() has %d codes, want %d: %v", len(codes), len(canonicalTexts), codes)
	}
	for i, c := range codes {
		if c != canonicalTexts[i].code {
			t.Errorf("Codes()[%d] = 0x%02x, want 0x%02x (ascending)", i, uint8(c), uint8(canonicalTexts[i].code))
		}
	}
	// The result is the caller's copy.
	codes[0] = 0x77
	if protocol.Codes()[0] != protocol.CodeShuttingDown {
		t.Error("Codes() returns shared storage")
	}
}

// The retry rule is by range, never by list: every one of the 256 codes,
// defined or not, is retryable exactly when it is below 0x10.
func TestCodeRetryableByRange(t *testing.T) {
	for i := 0; i <= math.MaxUint8; i++ {
		c := protocol.Code(i)
		if got, want := c.Retryable(), i < 0x10; got != want {
			t.Errorf("Code(0x%02x).Retryable() = %v, want %v", i, got, want)
		}
	}
	spot := []struct {
		code protocol.Code
		want bool
	}{
		{0x00, true}, {0x05, true}, {0x0f, true}, // unknown server conditions
		{0x10, false}, {0x19, false}, {0x99, false}, {0xff, false}, // unknown client errors
	}
	for _, s := range spot {
		if s.code.Retryable() != s.want {
			t.Errorf("Code(0x%02x).Retryable() = %v, want %v", uint8(s.code), !s.want, s.want)
		}
	}
}

func TestCodeUnknown(t *testing.T) {
	known := map[protocol.Code]bool{}
	for _, c := range canonicalTexts {
		known[c.code] = true
	}
	for i := 0; i <= math.MaxUint8; i++ {
		c := protocol.Code(i)
		if known[c] {
			continue
		}
		if e := c.Err(); e != nil {
			t.Errorf("Code(0x%02x).Err() = %v, want nil", i, e)
		}
		if got, want := c.String(), fmt.Sprintf("unknown error code 0x%02x", i); got != want {
			t.Errorf("Code(0x%02x).String() = %q, want %q", i, got, want)
		}
	}
	for code, want := range map[protocol.Code]string{
		0x00: "unknown error code 0x00",
		0x05: "unknown error code 0x05",
		0x99: "unknown error code 0x99",
		0xff: "unknown error code 0xff",
	} {
		if got := code.String(); got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	}
}

func TestCanonicalErrorsDistinct(t *testing.T) {
	for i, a := range canonicalTexts {
		for j, b := range canonicalTexts {
			if i != j && errors.Is(a.err, b.err) {
				t.Errorf("errors.Is(%v, %v) = true", a.err, b.err)
			}
		}
		if errors.Is(a.err, protocol.ErrUnexpectedFrame) {
			t.Errorf("errors.Is(%v, ErrUnexpectedFrame) = true", a.err)
		}
	}
}

// The errors of ValidateName and LeaseMS match the canonical value with
// errors.Is, also when wrapped again, and carry the code through errors.As.
func TestValidationErrorsWrap(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want *protocol.Error
	}{
		{"empty name", protocol.ValidateName(""), protocol.ErrEmptyName},
		{"long name", protocol.ValidateName(strings.Repeat("n", 256)), protocol.ErrNameTooLong},
		{"bad utf8", protocol.ValidateName("\xff"), protocol.ErrInvalidUTF8},
		{"zero lease", leaseErr(0), protocol.ErrInvalidLease},
		{"huge lease", leaseErr(protocol.MaxLease + time.Millisecond), protocol.ErrInvalidLease},
	}
	for _, c := range cases {
		if c.err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		wrapped := fmt.Errorf("dial lock: %w", c.err)
		for _, err := range []error{c.err, wrapped} {
			if !errors.Is(err, c.want) {
				t.Errorf("%s: errors.Is(%v, %v) = false", c.name, err, c.want)
			}
			var pe *protocol.Error
			if !errors.As(err, &pe) || pe != c.want || pe.Code != c.want.Code {
				t.Errorf("%s: errors.As(%v) = %v, want %v", c.name, err, pe, c.want)
			}
			for _, other := range canonicalTexts {
				if other.err != c.want && errors.Is(err, other.err) {
					t.Errorf("%s: errors.Is(%v, %v) = true", c.name, err, other.err)
				}
			}
		}
	}
}

func leaseErr(d time.Duration) error {
	_, err := protocol.LeaseMS(d)
	return err
}

func TestValidateName(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want error
	}{
		{"empty", "", protocol.ErrEmptyName},
		{"one byte", "a", nil},
		{"255 bytes", strings.Repeat("a", 255), nil},
		{"256 bytes", strings.Repeat("a", 256), protocol.ErrNameTooLong},
		{"65536 bytes", strings.Repeat("a", 65536), protocol.ErrNameTooLong},
		{"255 bytes multibyte", strings.Repeat("é", 127) + "a", nil},
		{"256 bytes multibyte", strings.Repeat("é", 128), protocol.ErrNameTooLong},
		{"254 bytes then a 2-byte rune", strings.Repeat("a", 254) + "é", protocol.ErrNameTooLong},
		{"utf8", nameUTF, nil},
		{"invalid ff", "\xff", protocol.ErrInvalidUTF8},
		{"invalid cut rune", "lock\xe6\x97", protocol.ErrInvalidUTF8},
		{"invalid surrogate", "\xed\xa0\x80", protocol.ErrInvalidUTF8},
		{"invalid overlong", "\xc0\xaf", protocol.ErrInvalidUTF8},
		{"too long beats invalid utf8", strings.Repeat("\xff", 256), protocol.ErrNameTooLong},
		// Raw bytes: no trimming, no case folding, so none of these is rejected
		// (in particular, blanks are not an empty name).
		{"spaces only", "   ", nil},
		{"leading and trailing blanks", " \tLock\n ", nil},
		{"upper case", "NIGHTLY-IMPORT", nil},
		{"NUL byte", "a\x00b", nil},
		{"decomposed é", "e\u0301", nil},
	}
	for _, c := range cases {
		err := protocol.ValidateName(c.in)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: ValidateName(%d bytes) = %v, want %v", c.name, len(c.in), err, c.want)
		}
		if c.want == protocol.ErrNameTooLong && err != nil && !strings.Contains(err.Error(), fmt.Sprint(len(c.in))) {
			t.Errorf("%s: %q does not say how long the name is", c.name, err)
		}
	}
}

// ValidateName and the server's decoder agree on every name a client can put
// on the wire: what ValidateName accepts decodes with the same bytes, and what
// it rejects the decoder rejects with the same error.
func TestValidateNameAgreesWithDecoder(t *testing.T) {
	names := []string{
		" Lock ", "LOCK", "lock", nameUTF, "\xff", "ok\xc3", "\xed\xa0\x80", strings.Repeat("a", 65535),
	}
	// Every length around the limit, in ASCII, in 2-byte runes (cut or not) and
	// with a bad byte at the end.
	for n := 1; n <= 300; n++ {
		names = append(names,
			strings.Repeat("a", n),
			strings.Repeat("é", n/2+1)[:n],
			strings.Repeat("b", n-1)+"\x80",
		)
	}
	for _, name := range names {
		frame := protocol.AppendAcquire(nil, 1000, name)
		var f protocol.Frame
		n, err := protocol.DecodeClient(frame, &f)
		verr := protocol.ValidateName(name)
		switch {
		case verr == nil:
			if n != len(frame) || err != nil || string(f.Name) != name {
				t.Errorf("name %q valid, but DecodeClient = %d, %v, %q", name, n, err, f.Name)
			}
		case !errors.Is(verr, err):
			t.Errorf("name of %d bytes: ValidateName = %v, DecodeClient = %d, %v", len(name), verr, n, err)
		}
	}
}

func TestLeaseMS(t *testing.T) {
	cases := []struct {
		in      time.Duration
		want    uint32
		wantErr bool
	}{
		{0, 0, true},
		{-1, 0, true},
		{-time.Hour, 0, true},
		{math.MinInt64, 0, true},
		{time.Nanosecond, 0, true},
		{999 * time.Microsecond, 0, true},
		{time.Millisecond - 1, 0, true},
		{time.Millisecond, 1, false},
		{time.Millisecond + 1, 2, false}, // any fraction rounds up
		{1500 * time.Microsecond, 2, false},
		{1999 * time.Microsecond, 2, false},
		{2 * time.Millisecond, 2, false},
		{2 * time.Second, 2000, false},
		{time.Hour, 3_600_000, false},
		{protocol.MaxLease - time.Millisecond, math.MaxUint32 - 1, false},
		{protocol.MaxLease - 1, math.MaxUint32, false},
		{protocol.MaxLease, math.MaxUint32, false},
		{protocol.MaxLease + 1, 0, true},
		{protocol.MaxLease + time.Millisecond, 0, true},
		{math.MaxInt64, 0, true},
	}
	for _, c := range cases {
		got, err := protocol.LeaseMS(c.in)
		if c.wantErr {
			if !errors.Is(err, protocol.ErrInvalidLease) || got != 0 {
				t.Errorf("LeaseMS(%v) = %d, %v; want 0, ErrInvalidLease", c.in, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("LeaseMS(%v) = %d, %v; want %d, nil", c.in, got, err, c.want)
		}
		// Never shorter than asked: the server must not drop the session early.
		if time.Duration(got)*time.Millisecond < c.in {
			t.Errorf("LeaseMS(%v) = %dms, shorter than asked", c.in, got)
		}
	}
	if protocol.MaxLease != time.Duration(math.MaxUint32)*time.Millisecond {
		t.Errorf("MaxLease = %v, want %v", protocol.MaxLease, time.Duration(math.MaxUint32)*time.Millisecond)
	}
}
