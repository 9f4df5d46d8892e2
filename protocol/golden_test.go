package protocol_test

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"

	"github.com/monolock/monolock/protocol"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.txt from the encoders (run for this package only)")

const goldenPath = "testdata/golden.txt"

// goldenVector is one frame of the golden file: how to encode it, what decoding
// its bytes must give, and the comment that describes it to readers of the file.
type goldenVector struct {
	name   string
	client bool // client to server; otherwise server to client
	doc    []string
	encode func(dst []byte) []byte
	want   protocol.Frame
}

// Inputs of the vectors, spelled out independently of the encoders.
var (
	name255 = strings.Repeat("a", protocol.MaxNameLen)
	nameUTF = "straße/日本/🔒" // ß is 2 bytes, 日 and 本 3 each, 🔒 4
	// reasonLong is 260 bytes. Byte 255 (0-based) is the second byte of 日, so
	// the encoder must cut before 日 and send 254 bytes.
	reasonLong    = strings.Repeat("x", 254) + "日本"
	reasonLongCut = strings.Repeat("x", 254)
	reasonDetail  = "unknown message type: 0x7f"
)

// canonicalTexts is the code table of protocol.md, copied by hand so that the
// package's own table is checked against the spec, not against itself.
var canonicalTexts = []struct {
	code protocol.Code
	slug string
	text string
	err  *protocol.Error
}{
	{0x01, "shutting-down", "server shutting down", protocol.ErrShuttingDown},
	{0x02, "closed-by-admin", "closed by administrator", protocol.ErrClosedByAdmin},
	{0x10, "unsupported-version", "unsupported protocol version", protocol.ErrUnsupportedVersion},
	{0x11, "first-message-not-acquire", "first message must be ACQUIRE", protocol.ErrFirstMessageNotAcquire},
	{0x12, "duplicate-acquire", "duplicate ACQUIRE", protocol.ErrDuplicateAcquire},
	{0x13, "unknown-message-type", "unknown message type", protocol.ErrUnknownMessageType},
	{0x14, "empty-name", "empty lock name", protocol.ErrEmptyName},
	{0x15, "name-too-long", "lock name too long", protocol.ErrNameTooLong},
	{0x16, "invalid-utf8", "lock name is not valid UTF-8", protocol.ErrInvalidUTF8},
	{0x17, "invalid-lease", "lease must be positive", protocol.ErrInvalidLease},
	{0x18, "not-authorized", "not authorized for lock", protocol.ErrNotAuthorized},
}

// byteCount spells out a length in bytes.
func byteCount(n int) string {
	if n == 1 {
		return "1 byte"
	}
	return fmt.Sprintf("%d bytes", n)
}

// acquireVector describes an ACQUIRE; nameDoc shows the name to a reader and
// nameNote, if not empty, follows the byte count.
func acquireVector(name string, leaseMS uint32, lockName, nameDoc, nameNote string) goldenVector {
	size := byteCount(len(lockName))
	if nameNote != "" {
		size += "; " + nameNote
	}
	return goldenVector{
		name:   name,
		client: true,
		doc: []string{
			"ACQUIRE, client to server",
			"  version  = 1",
			fmt.Sprintf("  lease_ms = %d", leaseMS),
			fmt.Sprintf("  name     = %s (%s)", nameDoc, size),
		},
		encode: func(dst []byte) []byte { return protocol.AppendAcquire(dst, leaseMS, lockName) },
		want: protocol.Frame{
			Type: protocol.TypeAcquire, Version: 1, LeaseMS: leaseMS, Name: []byte(lockName),
		},
	}
}

func acquiredVector(name string, token uint64) goldenVector {
	return goldenVector{
		name: name,
		doc: []string{
			"ACQUIRED, server to client",
			fmt.Sprintf("  token = 0x%016x (%d)", token, token),
		},
		encode: func(dst []byte) []byte { return protocol.AppendAcquired(dst, token) },
		want:   protocol.Frame{Type: protocol.TypeAcquired, Token: token},
	}
}

func errorVector(name string, code protocol.Code, reason, wantReason string, reasonDoc []string) goldenVector {
	class := "client error: report, do not retry"
	if code < 0x10 {
		class = "server condition: reconnect"
	}
	doc := []string{
		"ERROR, server to client",
		fmt.Sprintf("  code   = 0x%02x (%s)", uint8(code), class),
	}
	if reasonDoc == nil {
		reasonDoc = []string{fmt.Sprintf("  reason = %q (%s)", reason, byteCount(len(reason)))}
	}
	return goldenVector{
		name:   name,
		doc:    append(doc, reasonDoc...),
		encode: func(dst []byte) []byte { return protocol.AppendError(dst, code, reason) },
		want:   protocol.Frame{Type: protocol.TypeError, Code: code, Reason: []byte(wantReason)},
	}
}

func goldenVectors() []goldenVector {
	v := []goldenVector{
		acquireVector("acquire", 2000, "nightly-import", `"nightly-import"`, ""),
		acquireVector("acquire-name-255", 2000, name255, `"a" × 255`, "the longest name allowed"),
		acquireVector("acquire-name-utf8", 30000, nameUTF, `"straße/日本/🔒"`,
			"ß is 2 bytes, 日 and 本 3 each, 🔒 4"),
		acquireVector("acquire-lease-max", math.MaxUint32, "x", `"x"`, "lease_ms is a u32 and has no other limit"),
		{
			name:   "heartbeat",
			client: true,
			doc:    []string{"HEARTBEAT, client to server"},
			encode: protocol.AppendHeartbeat,
			want:   protocol.Frame{Type: protocol.TypeHeartbeat},
		},
		{
			name:   "release",
			client: true,
			doc: []string{
				"RELEASE, client to server",
				"  Ends the session. The server answers nothing and closes first; a",
				"  server from before RELEASE answers ERROR 0x13 and closes, which ends it too.",
			},
			encode: protocol.AppendRelease,
			want:   protocol.Frame{Type: protocol.TypeRelease},
		},
		{
			name:   "waiting",
			doc:    []string{"WAITING, server to client"},
			encode: protocol.AppendWaiting,
			want:   protocol.Frame{Type: protocol.TypeWaiting},
		},
		acquiredVector("acquired", 0x0000000100000002),
		acquiredVector("acquired-token-max", math.MaxUint64),
	}
	for _, c := range canonicalTexts {
		name := fmt.Sprintf("error-%02x-%s", uint8(c.code), c.slug)
		v = append(v, errorVector(name, c.code, c.text, c.text, nil))
	}
	v = append(v,
		errorVector("error-13-with-detail", protocol.CodeUnknownMessageType, reasonDetail, reasonDetail,
			[]string{
				fmt.Sprintf("  reason = %q (%s)", reasonDetail, byteCount(len(reasonDetail))),
				"  The canonical text may carry detail; clients never parse the reason.",
			}),
		errorVector("error-empty-reason", protocol.CodeShuttingDown, "", "", []string{
			`  reason = "" (0 bytes; an empty reason is allowed)`,
		}),
		errorVector("error-reason-truncated", protocol.CodeShuttingDown, reasonLong, reasonLongCut, []string{
			`  reason = "x" × 254 followed by "日本" (260 bytes) handed to the encoder.`,
			"  A reason is at most 255 bytes. Byte 255 is inside 日 (e6 97 a5), so the",
			`  encoder cuts at the UTF-8 boundary before it: "x" × 254, reason_len 0xfe.`,
		}),
	)
	return v
}

const goldenHeader = `# monolock wire protocol v1: golden byte vectors
#
# Every frame of protocol version 1, byte for byte, for people writing a client
# (or a server) in another language. Encode the frame described in the comment
# above a vector and compare with its bytes; decode the bytes and compare with
# the comment. Generated from monolock's Go package protocol and checked by its
# tests, so the Go encoder and decoder agree with every line below.
#
# Format
#   - A line starting with '#' is a comment; blank lines separate vectors.
#   - A vector is one line: NAME, one TAB, HEX.
#   - NAME is unique and made of [a-z0-9-].
#   - HEX is lowercase hexadecimal, two digits per byte. Single spaces inside HEX
#     separate the frame's fields for the reader and mean nothing: delete every
#     space, then decode the hex.
#
# Frames (all integers big endian)
#   client to server
#     ACQUIRE    01 | version u8 | lease_ms u32 | name_len u16 | name
#     HEARTBEAT  02
#     RELEASE    03
#   server to client
#     WAITING    11
#     ACQUIRED   12 | token u64
#     ERROR      13 | code u8 | reason_len u8 | reason (UTF-8)
#
# Regenerate with: go test ./protocol -run TestGolden -update
# (then review the diff: these bytes are the contract).
`

// renderGolden writes the golden file for vs, with the bytes each one encodes to.
func renderGolden(vs []goldenVector) []byte {
	var b bytes.Buffer
	b.WriteString(goldenHeader)
	for _, v := range vs {
		b.WriteString("\n")
		for _, line := range v.doc {
			b.WriteString(strings.TrimRight("# "+line, " ") + "\n")
		}
		fmt.Fprintf(&b, "%s\t%s\n", v.name, fieldHex(v.encode(nil)))
	}
	return b.Bytes()
}

// fieldHex renders a frame as hex with a space between its fields.
func fieldHex(frame []byte) string {
	var widths []int
	switch protocol.Type(frame[0]) {
	case protocol.TypeAcquire:
		widths = []int{1, 1, 4, 2}
	case protocol.TypeAcquired:
		widths = []int{1, 8}
	case protocol.TypeError:
		widths = []int{1, 1, 1}
	}
	var parts []string
	rest := frame
	for _, w := range widths {
		parts = append(parts, hex.EncodeToString(rest[:w]))
		rest = rest[w:]
	}
	if len(rest) > 0 || len(parts) == 0 {
		parts = append(parts, hex.EncodeToString(rest))
	}
	return strings.Join(parts, " ")
}

type goldenEntry struct {
	name  string
	bytes []byte
}

// parseGolden reads the golden file format documented in its header.
func parseGolden(t *testing.T, data []byte) []goldenEntry {
	t.Helper()
	var out []goldenEntry
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for lineNo := 1; sc.Scan(); lineNo++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, hx, ok := strings.Cut(line, "\t")
		if !ok {
			t.Fatalf("%s:%d: no TAB in vector line %q", goldenPath, lineNo, line)
		}
		if seen[name] {
			t.Fatalf("%s:%d: duplicate vector name %q", goldenPath, lineNo, name)
		}
		seen[name] = true
		b, err := hex.DecodeString(strings.ReplaceAll(hx, " ", ""))
		if err != nil {
			t.Fatalf("%s:%d: vector %s: %v", goldenPath, lineNo, name, err)
		}
		out = append(out, goldenEntry{name, b})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// loadGolden returns the golden bytes by vector name, rewriting the file first
// under -update.
func loadGolden(t *testing.T) map[string][]byte {
	t.Helper()
	vs := goldenVectors()
	rendered := renderGolden(vs)
	if *update {
		if err := os.WriteFile(goldenPath, rendered, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", goldenPath)
	}
	data, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatalf("%v (run go test ./protocol -run TestGolden -update to create it)", err)
	}
	entries := parseGolden(t, data)
	golden := make(map[string][]byte, len(entries))
	for _, e := range entries {
		golden[e.name] = e.bytes
	}
	for _, v := range vs {
		if _, ok := golden[v.name]; !ok {
			t.Errorf("%s has no vector %q", goldenPath, v.name)
		}
	}
	if len(entries) != len(vs) {
		t.Errorf("%s has %d vectors, the test defines %d", goldenPath, len(entries), len(vs))
	}
	if !bytes.Equal(data, rendered) && !t.Failed() {
		// Same bytes, different text: a comment went stale.
		t.Errorf("%s is out of date with the vector descriptions; review and run with -update", goldenPath)
	}
	return golden
}

func TestGoldenEncode(t *testing.T) {
	golden := loadGolden(t)
	for _, v := range goldenVectors() {
		want, ok := golden[v.name]
		if !ok {
			continue
		}
		t.Run(v.name, func(t *testing.T) {
			if got := v.encode(nil); !bytes.Equal(got, want) {
				t.Errorf("encode(nil)\n got % x\nwant % x", got, want)
			}
			// Append semantics: the prefix is kept, the frame follows it.
			prefix := []byte{0xde, 0xad}
			got := v.encode(append(make([]byte, 0, 512), prefix...))
			if !bytes.Equal(got, cat(prefix, want)) {
				t.Errorf("encode(prefix)\n got % x\nwant % x", got, cat(prefix, want))
			}
		})
	}
}

func TestGoldenDecode(t *testing.T) {
	golden := loadGolden(t)
	for _, v := range goldenVectors() {
		b, ok := golden[v.name]
		if !ok {
			continue
		}
		t.Run(v.name, func(t *testing.T) {
			if v.client {
				checkGoldenClient(t, b, v.want)
			} else {
				checkGoldenServer(t, b, v.want)
			}
		})
	}
}

func checkGoldenClient(t *testing.T, b []byte, want protocol.Frame) {
	t.Helper()
	var f protocol.Frame
	n, err := protocol.DecodeClient(b, &f)
	if n != len(b) || err != nil {
		t.Fatalf("DecodeClient = %d, %v; want %d, nil", n, err, len(b))
	}
	if d := diffFrame(f, want); d != "" {
		t.Errorf("DecodeClient: %s", d)
	}
	if want.Type == protocol.TypeAcquire {
		if !utf8.Valid(f.Name) || protocol.ValidateName(string(f.Name)) != nil {
			t.Errorf("decoded name %q does not pass ValidateName", f.Name)
		}
	}
	// A client frame is never a server frame.
	var sf protocol.Frame
	if n, err := protocol.DecodeServer(b, &sf); n != 0 || err != protocol.ErrUnexpectedFrame {
		t.Errorf("DecodeServer(client frame) = %d, %v; want 0, ErrUnexpectedFrame", n, err)
	}
}

func checkGoldenServer(t *testing.T, b []byte, want protocol.Frame) {
	t.Helper()
	var f protocol.Frame
	n, err := protocol.DecodeServer(b, &f)
	if n != len(b) || err != nil {
		t.Fatalf("DecodeServer = %d, %v; want %d, nil", n, err, len(b))
	}
	if d := diffFrame(f, want); d != "" {
		t.Errorf("DecodeServer: %s", d)
	}
	if want.Type == protocol.TypeError && !utf8.Valid(f.Reason) {
		t.Errorf("reason %q is not valid UTF-8", f.Reason)
	}

	readers := map[string]func() io.Reader{
		"bytes":   func() io.Reader { return bytes.NewReader(b) },
		"onebyte": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(b)) },
		"dataerr": func() io.Reader { return iotest.DataErrReader(bytes.NewReader(b)) },
	}
	for rname, newReader := range readers {
		r := newReader()
		var buf protocol.FrameBuffer
		var rf protocol.Frame
		if err := protocol.ReadServerFrame(r, &buf, &rf); err != nil {
			t.Fatalf("ReadServerFrame(%s) = %v", rname, err)
		}
		if d := diffFrame(rf, want); d != "" {
			t.Errorf("ReadServerFrame(%s): %s", rname, d)
		}
		if err := protocol.ReadServerFrame(r, &buf, &rf); err != io.EOF {
			t.Errorf("ReadServerFrame(%s) after the frame = %v, want io.EOF", rname, err)
		}
	}

	// A server frame is never a client frame.
	var cf protocol.Frame
	if n, err := protocol.DecodeClient(b, &cf); n != 0 || !errors.Is(err, protocol.ErrUnknownMessageType) {
		t.Errorf("DecodeClient(server frame) = %d, %v; want 0, ErrUnknownMessageType", n, err)
	}
}

// TestGoldenCoversEveryCode keeps the golden file in step with Codes(): a code
// added to the package without a vector fails here.
func TestGoldenCoversEveryCode(t *testing.T) {
	have := map[protocol.Code]bool{}
	for _, v := range goldenVectors() {
		if v.want.Type == protocol.TypeError && string(v.want.Reason) == v.want.Code.String() {
			have[v.want.Code] = true
		}
	}
	for _, c := range protocol.Codes() {
		if !have[c] {
			t.Errorf("no golden ERROR vector with the canonical text of code 0x%02x", uint8(c))
		}
	}
}
