package protocol

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCutUTF8(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"deploy", 10, "deploy"},
		{"deploy", 6, "deploy"},
		{"deploy", 3, "dep"},
		{"deploy", 0, ""},
		{"deploy", -1, ""},
		{"ab€", 4, "ab"}, // € is 3 bytes: never split
		{"ab€", 5, "ab€"},
		{"ab€", 2, "ab"},
		{"é", 1, ""},
	} {
		if got := CutUTF8(tc.s, tc.n); got != tc.want {
			t.Errorf("CutUTF8(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
	long := strings.Repeat("日本", 100)
	for n := range len(long) + 1 {
		got := CutUTF8(long, n)
		if len(got) > n || !utf8.ValidString(got) || len(got) < n-utf8.UTFMax+1 || !strings.HasPrefix(long, got) {
			t.Fatalf("CutUTF8(…, %d) = %d bytes, valid %v", n, len(got), utf8.ValidString(got))
		}
	}
}
