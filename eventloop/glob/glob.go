// Package glob is monolock's one glob matcher, shared by the ACL (identity
// and lock patterns) and the admin API's ?match= filter.
//
// The language is deliberately small:
//
//   - '*' matches any run of characters, including '/', possibly empty;
//   - '?' matches exactly one character: one UTF-8 code point;
//   - every other character matches itself, case sensitively;
//   - the pattern must match the whole string.
//
// There are no escapes and no character classes, so '[', '\\' and the like
// are ordinary characters, and a literal '*' or '?' cannot be expressed.
//
// A "character" is a unit of UTF-8 decoding: one valid code point, or one
// byte of an invalid sequence (each such byte is a unit of its own, as
// utf8.DecodeRuneInString reports them). This applies to the pattern and to
// the string alike, so '?' never matches half of a multi-byte character and a
// stray byte in a pattern only matches the same stray byte.
//
// Matching runs in O(len(pattern)·len(s)) time in the worst case (the greedy
// star with backtracking to the last star), never exponentially, and does not
// allocate.
package glob

import (
	"errors"
	"strings"
	"unicode/utf8"
)

// ErrEmpty is returned by Compile for an empty pattern.
var ErrEmpty = errors.New(`glob: empty pattern: a pattern must have at least one character; use "*" to match everything`)

// Pattern is a compiled glob. The zero Pattern matches nothing. A Pattern is
// immutable and safe for concurrent use.
type Pattern struct {
	src      string // as given, for String
	compiled string // src with runs of '*' collapsed to one
	literal  bool   // no '*' and no '?': Match is string equality
}

// Compile checks pattern and prepares it for matching. The only invalid
// pattern is the empty one (it could only ever match the empty string, which
// is never a lock name nor an identity worth naming, so it is almost
// certainly a mistake); Compile returns ErrEmpty for it.
func Compile(pattern string) (Pattern, error) {
	if pattern == "" {
		return Pattern{}, ErrEmpty
	}
	compiled := pattern
	if strings.Contains(pattern, "**") {
		var b strings.Builder
		b.Grow(len(pattern))
		for i := 0; i < len(pattern); i++ {
			if pattern[i] == '*' && i > 0 && pattern[i-1] == '*' {
				continue
			}
			b.WriteByte(pattern[i])
		}
		compiled = b.String()
	}
	return Pattern{
		src:      pattern,
		compiled: compiled,
		literal:  !strings.ContainsAny(pattern, "*?"),
	}, nil
}

// MustCompile is Compile for patterns known to be valid; it panics on error.
func MustCompile(pattern string) Pattern {
	p, err := Compile(pattern)
	if err != nil {
		panic(err)
	}
	return p
}

// String returns the pattern as it was given to Compile.
func (p Pattern) String() string { return p.src }

// Literal reports whether the pattern has no wildcard, and if so the only
// string it matches. Callers can use it to index exact names.
func (p Pattern) Literal() (string, bool) {
	if p.src == "" || !p.literal {
		return "", false
	}
	return p.src, true
}

// Match reports whether the whole of s matches the pattern. The zero Pattern
// matches nothing.
func (p Pattern) Match(s string) bool {
	switch {
	case p.compiled == "":
		return false
	case p.literal:
		// Equal bytes decode to equal characters, and only they do.
		return s == p.compiled
	case p.compiled == "*":
		return true
	}
	return match(p.compiled, s)
}

// Match reports whether s matches pattern. An invalid (empty) pattern
// matches nothing; use Compile to tell that apart and to match repeatedly.
func Match(pattern, s string) bool {
	if pattern == "" {
		return false
	}
	if !strings.ContainsAny(pattern, "*?") {
		return s == pattern
	}
	return match(pattern, s)
}

// match is the greedy star with backtracking to the most recent star: when
// the rest of the pattern fails, the last '*' takes one more character and
// the match resumes right after it. Earlier stars never need to move again,
// which is what keeps this O(len(p)·len(s)).
func match(p, s string) bool {
	px, sx := 0, 0
	starPx, starSx := -1, 0 // the last '*' seen and where its next try starts
	for px < len(p) || sx < len(s) {
		if px < len(p) {
			switch c := p[px]; {
			case c == '*':
				// Try an empty run first; remember how to retry with one
				// more character.
				starPx, starSx = px, sx
				px++
				continue
			case sx == len(s):
				// A '?' or a literal needs a character and there is none.
			case c == '?':
				px++
				sx += unitLen(s, sx)
				continue
			case c < utf8.RuneSelf:
				// An ASCII byte is always a whole character, in the pattern
				// and in s.
				if s[sx] == c {
					px++
					sx++
					continue
				}
			default:
				pw, sw := unitLen(p, px), unitLen(s, sx)
				if pw == sw && p[px:px+pw] == s[sx:sx+sw] {
					px += pw
					sx += sw
					continue
				}
			}
		}
		if starPx >= 0 && starSx < len(s) {
			starSx += unitLen(s, starSx)
			px, sx = starPx+1, starSx
			continue
		}
		return false
	}
	return true
}

// unitLen is the length in bytes of the character at s[i]: a code point's
// encoding, or 1 for a byte of an invalid sequence. i < len(s).
func unitLen(s string, i int) int {
	if s[i] < utf8.RuneSelf {
		return 1
	}
	_, w := utf8.DecodeRuneInString(s[i:])
	return w
}
