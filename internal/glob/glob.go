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
// Matching does not allocate. The parts of the pattern before the first '*'
// and after the last are anchored and cost one pass each; each part between
// two stars is placed once, at its leftmost match, found with a substring
// search. Only a part between two stars that contains '?' can cost
// len(part)·len(s), so nothing costs more than O(len(pattern)·len(s)), and a
// name that almost matches costs about as much as one that matches.
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

	costBase, costPerByte int // Cost(n) = costBase + costPerByte·n
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
	p := Pattern{
		src:      pattern,
		compiled: compiled,
		literal:  !strings.ContainsAny(pattern, "*?"),
	}
	p.cost()
	return p, nil
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

// Cost is an upper bound on the steps (byte comparisons, each a nanosecond
// or so) that Match takes on a string of n bytes: a pass over the string,
// plus the pattern's parts before its first and after its last '*', plus,
// for each part between two stars, a pass over the string, times the part's
// length when it contains '?'. Callers that match a pattern given by a
// client against many strings use it to bound the work before doing it.
func (p Pattern) Cost(n int) int { return p.costBase + p.costPerByte*n }

// cost sets costBase and costPerByte (see Cost).
func (p *Pattern) cost() {
	c := p.compiled
	first, last := strings.IndexByte(c, '*'), strings.LastIndexByte(c, '*')
	switch {
	case c == "*":
		p.costBase, p.costPerByte = 1, 0
		return
	case first < 0: // literal, or '?' without '*': one pass
		p.costBase, p.costPerByte = 1+len(c), 1
		return
	}
	p.costBase, p.costPerByte = 1+first+len(c)-last-1, 1
	for mid := c[first:last]; mid != ""; {
		mid = mid[1:]
		seg := mid
		if i := strings.IndexByte(mid, '*'); i >= 0 {
			seg, mid = mid[:i], mid[i:]
		} else {
			mid = ""
		}
		switch {
		case seg == "":
		case strings.IndexByte(seg, '?') >= 0:
			p.costBase += len(seg)
			p.costPerByte += len(seg)
		default:
			p.costBase += len(seg)
			p.costPerByte++
		}
	}
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

// match reports whether s matches p, which has a wildcard. The pattern is
// cut at its stars into segments. The segment before the first star must
// match the start of s and the one after the last star its end; neither can
// move, so each is one linear pass. Between them, each segment is placed at
// its leftmost match after the previous one: a later place could only leave
// less room for the segments that follow, and the stars absorb whatever lies
// between. A placed segment is never moved again, which keeps a name that
// almost matches (the tail "*aaaa…ab" against "aaaa…a") linear instead of
// costing len(p)·len(s) as the greedy star with backtracking did. Only a
// middle segment containing '?' can still cost len(segment)·len(s).
func match(p, s string) bool {
	first := strings.IndexByte(p, '*')
	if first < 0 {
		n, ok := matchPrefix(p, s)
		return ok && n == len(s)
	}
	n, ok := matchPrefix(p[:first], s)
	if !ok {
		return false
	}
	s = s[n:]
	last := strings.LastIndexByte(p, '*')
	if n, ok = matchSuffix(p[last+1:], s); !ok {
		return false
	}
	s = s[:len(s)-n]
	for mid := p[first:last]; mid != ""; {
		mid = mid[1:] // the star
		seg := mid
		if i := strings.IndexByte(mid, '*'); i >= 0 {
			seg, mid = mid[:i], mid[i:]
		} else {
			mid = ""
		}
		if seg == "" {
			continue
		}
		at, n := find(seg, s)
		if at < 0 {
			return false
		}
		s = s[at+n:]
	}
	return true
}

// matchPrefix matches seg, which has no '*', against the start of s and
// returns how many bytes of s it took. s must start at a character boundary.
//
// A segment ends at a '*', a '?' or the end of the pattern, all of which end
// any multi-byte sequence, so its characters decode the same on their own as
// within the pattern.
func matchPrefix(seg, s string) (n int, ok bool) {
	sx := 0
	for px := 0; px < len(seg); {
		if sx == len(s) {
			return 0, false
		}
		switch c := seg[px]; {
		case c == '?':
			px++
			sx += unitLen(s, sx)
		case c < utf8.RuneSelf:
			// An ASCII byte is always a whole character, in the pattern
			// and in s.
			if s[sx] != c {
				return 0, false
			}
			px++
			sx++
		default:
			pw, sw := unitLen(seg, px), unitLen(s, sx)
			if pw != sw || seg[px:px+pw] != s[sx:sx+sw] {
				return 0, false
			}
			px += pw
			sx += sw
		}
	}
	return sx, true
}

// matchSuffix is matchPrefix from the end: seg against the end of s, which
// must end at a character boundary. Decoding backwards from a boundary finds
// the same characters as decoding forwards (see lastUnitLen).
func matchSuffix(seg, s string) (n int, ok bool) {
	sx := len(s)
	for px := len(seg); px > 0; {
		if sx == 0 {
			return 0, false
		}
		switch c := seg[px-1]; {
		case c == '?':
			px--
			sx -= lastUnitLen(s[:sx])
		case c < utf8.RuneSelf:
			if s[sx-1] != c {
				return 0, false
			}
			px--
			sx--
		default:
			pw, sw := lastUnitLen(seg[:px]), lastUnitLen(s[:sx])
			if pw != sw || seg[px-pw:px] != s[sx-sw:sx] {
				return 0, false
			}
			px -= pw
			sx -= sw
		}
	}
	return len(s) - sx, true
}

// find returns the leftmost character boundary at which seg (no '*') matches
// in s and how many bytes it takes there, or -1. Candidates come from
// strings.Index on seg's literal head, so a segment without '?' costs about
// what a substring search costs.
func find(seg, s string) (at, n int) {
	head := seg
	if q := strings.IndexByte(seg, '?'); q >= 0 {
		head = seg[:q]
	}
	for off := 0; off < len(s); off = at + 1 {
		at = off
		if head != "" {
			i := strings.Index(s[off:], head)
			if i < 0 {
				return -1, 0
			}
			at += i
		}
		if !boundary(s, at) {
			continue // a stray byte in seg never matches the middle of a character
		}
		if n, ok := matchPrefix(seg, s[at:]); ok {
			return at, n
		}
	}
	return -1, 0
}

// boundary reports whether a character of s starts at s[i]. Only a
// continuation byte can be inside a character, and only inside a valid code
// point that starts at most three bytes earlier: the nearest non-continuation
// byte before it.
func boundary(s string, i int) bool {
	if i == 0 || i >= len(s) || utf8.RuneStart(s[i]) {
		return true
	}
	for j := i - 1; j >= 0 && j > i-utf8.UTFMax; j-- {
		if utf8.RuneStart(s[j]) {
			_, w := utf8.DecodeRuneInString(s[j:])
			return j+w <= i
		}
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

// lastUnitLen is the length in bytes of the character that ends s, which must
// end at a character boundary and not be empty. A valid code point ending
// there starts at the nearest non-continuation byte, which is where
// DecodeLastRuneInString looks, and forward decoding would also have started
// a character there (no valid code point covers a non-continuation byte it
// does not start with). Otherwise the last byte is a character of its own
// both ways.
func lastUnitLen(s string) int {
	if s[len(s)-1] < utf8.RuneSelf {
		return 1
	}
	_, w := utf8.DecodeLastRuneInString(s)
	return w
}
