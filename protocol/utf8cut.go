package protocol

import "unicode/utf8"

// CutUTF8 returns the longest prefix of s that is at most n bytes long and
// does not end inside a multi-byte character, so a shortened text stays
// valid UTF-8 when s was. ERROR reasons are cut this way to fit their length
// byte, and people see names and reasons cut the same way.
func CutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
