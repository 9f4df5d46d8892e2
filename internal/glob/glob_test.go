package glob_test

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"

	"github.com/monolock/monolock/internal/glob"
)

var matchTests = []struct {
	pattern, s string
	want       bool
}{
	// Literals: whole string, case sensitive.
	{"nightly", "nightly", true},
	{"nightly", "Nightly", false},
	{"nightly", "nightly2", false},
	{"nightly", "xnightly", false},
	{"nightly", "", false},
	{"a/b", "a/b", true},

	// '*' crosses '/', may be empty, must still match the whole string.
	{"nightly/*", "nightly/import", true},
	{"nightly/*", "nightly/a/b/c", true},
	{"nightly/*", "nightly/", true},
	{"nightly/*", "nightly", false},
	{"nightly/*", "nightlyx", false},
	{"*/import", "nightly/import", true},
	{"*/import", "a/b/import", true},
	{"*/import", "/import", true},
	{"*/import", "import", false},
	{"a*b*c", "abc", true},
	{"a*b*c", "a/x/b/y/c", true},
	{"a*b*c", "acb", false},
	{"a*b", "abab", true},
	{"a*b", "abba", false},
	{"*a", "aaaa", true},
	{"*ab*ab", "abxab", true},
	{"*ab*ab", "abab", true},
	{"*ab*ab", "ab", false},

	// The part after the last star is anchored at the end, the part before
	// the first at the start; they must not overlap.
	{"*ab", "ab", true},
	{"ab*ab", "ab", false},
	{"ab*ab", "abab", true},
	{"a*a", "a", false},
	{"a?*?a", "aba", false},
	{"a?*?a", "abba", true},
	{"*" + strings.Repeat("a", 20) + "b", strings.Repeat("a", 40), false},
	{"*" + strings.Repeat("a", 20) + "b", strings.Repeat("a", 40) + "b", true},

	// Segments between stars go to their leftmost place.
	{"*ab*ba*", "aba", false}, // the segments cannot share the b
	{"*ab*ba*", "abba", true},
	{"*ab*ba*", "ab_ba", true},
	{"*a?c*", "xxabcxx", true},
	{"*a?c*", "xxab", false},
	{"*?b?*", "b", false},
	{"x*aab*y", "xaaab_y", true},
	{"x*aab*y", "xaaa_b_y", false},

	// '?' is exactly one character.
	{"shard-?", "shard-3", true},
	{"shard-?", "shard-31", false},
	{"shard-?", "shard-", false},
	{"shard-?", "shard-/", true},
	{"shard-??", "shard-31", true},
	{"?", "", false},
	{"?", "a", true},
	{"?", "ab", false},

	// Multi-byte characters: '?' takes a whole code point, never a byte.
	{"?", "é", true},
	{"??", "é", false},
	{"?", "日", true},
	{"?", "😀", true},
	{"??", "😀", false},
	{"caf?", "café", true},
	{"caf??", "café", false},
	{"?本", "日本", true},
	{"日*", "日本/語", true},
	{"*語", "日本/語", true},
	{"*本?", "日本語", true},
	{"é", "é", true},
	{"é", "e\u0301", false}, // no normalization: a decomposed é is two characters
	{"e?", "e\u0301", true},

	// Invalid UTF-8: each stray byte is one character, in both strings.
	{"?", "\xff", true},
	{"??", "\xff\xfe", true},
	{"?", "\xff\xfe", false},
	{"?", "\xe6\x97", false}, // a truncated 日 is two stray bytes
	{"??", "\xe6\x97", true},
	{"\xc3?", "é", false}, // a stray lead byte does not match half of é
	{"\xc3?", "\xc3\xa9", false},
	{"\xc3?", "\xc3x", true},
	{"*\xa9", "é", false},
	{"*\xa9", "x\xa9", true},
	{"*\xa9*", "é", false}, // a stray byte between stars does not match inside é either
	{"*\xa9*", "é\xa9", true},
	{"*\xc3*", "é", false},
	{"*\xc3", "é\xc3", true},
	{"*\xc3\xa9*", "\xc3\xa9", true},
	{"*?\xa9", "é", false},
	{"*?\xa9", "é\xa9", true},
	{"\xe6*", "\xe6\x97\xa5", false}, // 日 starts with the byte \xe6 but is one character
	{"\xe6*", "\xe6\x97", true},
	{"\xff", "\xff", true},
	{"\xff", "\ufffd", false},
	{"\ufffd", "\xff", false},

	// The empty string.
	{"*", "", true},
	{"**", "", true},
	{"?*", "", false},
	{"*?", "", false},

	// Patterns of only stars.
	{"*", "anything/at/all", true},
	{"***", "x", true},
	{"*****", "日本/語", true},

	// No escapes, no classes: these characters are literal.
	{`[ab]`, "a", false},
	{`[ab]`, "[ab]", true},
	{`a\*`, `a\xyz`, true},
	{`a\*`, `a*`, false},
	{"a.b", "axb", false},
	{"a.b", "a.b", true},
	{"a+", "aa", false},
}

func TestMatch(t *testing.T) {
	for _, tt := range matchTests {
		p, err := glob.Compile(tt.pattern)
		if err != nil {
			t.Fatalf("Compile(%q): %v", tt.pattern, err)
		}
		if got := p.Match(tt.s); got != tt.want {
			t.Errorf("Compile(%q).Match(%q) = %v, want %v", tt.pattern, tt.s, got, tt.want)
		}
		if got := glob.Match(tt.pattern, tt.s); got != tt.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tt.pattern, tt.s, got, tt.want)
		}
		if got := refMatch(tt.pattern, tt.s); got != tt.want {
			t.Errorf("reference(%q, %q) = %v, want %v: the test table or the reference is wrong", tt.pattern, tt.s, got, tt.want)
		}
		if got := backtrackMatch(tt.pattern, tt.s); got != tt.want {
			t.Errorf("backtracking reference(%q, %q) = %v, want %v: the test table or the reference is wrong", tt.pattern, tt.s, got, tt.want)
		}
	}
}

func TestCompileEmpty(t *testing.T) {
	_, err := glob.Compile("")
	if !errors.Is(err, glob.ErrEmpty) {
		t.Fatalf(`Compile("") error = %v, want ErrEmpty`, err)
	}
	if !strings.Contains(err.Error(), `"*"`) {
		t.Errorf("the error %q should say what to do instead", err)
	}
	if glob.Match("", "") || glob.Match("", "x") {
		t.Error(`Match("", …) = true, want false: an invalid pattern matches nothing`)
	}
	var zero glob.Pattern
	if zero.Match("") || zero.Match("x") {
		t.Error("the zero Pattern matched, want it to match nothing")
	}
}

func TestMustCompilePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error(`MustCompile("") did not panic`)
		}
	}()
	glob.MustCompile("")
}

func TestStringAndLiteral(t *testing.T) {
	for _, tt := range []struct {
		pattern string
		literal bool
	}{
		{"nightly/import", true},
		{"a**b", false},
		{"shard-?", false},
		{"[x]", true},
	} {
		p := glob.MustCompile(tt.pattern)
		if p.String() != tt.pattern {
			t.Errorf("String() = %q, want %q", p.String(), tt.pattern)
		}
		lit, ok := p.Literal()
		if ok != tt.literal || (ok && lit != tt.pattern) {
			t.Errorf("Compile(%q).Literal() = %q, %v; want literal=%v", tt.pattern, lit, ok, tt.literal)
		}
	}
	if _, ok := (glob.Pattern{}).Literal(); ok {
		t.Error("the zero Pattern claims to be a literal")
	}
}

// TestNoBlowUp is the classic exponential case for backtracking matchers:
// a*a*a*…b against aaaa…. It must finish at once.
func TestNoBlowUp(t *testing.T) {
	pattern := strings.Repeat("a*", 50) + "b"
	s := strings.Repeat("a", 10_000)
	if glob.Match(pattern, s) {
		t.Fatal("matched a string without b")
	}
	if !glob.Match(pattern, s+"b") {
		t.Fatal("did not match a string ending in b")
	}
}

// units splits s into characters as the package defines them: code points,
// and single bytes of invalid sequences.
func units(s string) []string {
	var u []string
	for len(s) > 0 {
		_, w := utf8.DecodeRuneInString(s)
		u = append(u, s[:w])
		s = s[w:]
	}
	return u
}

// refMatch is the obviously correct reference: dynamic programming over
// characters, straight from the definition.
func refMatch(pattern, s string) bool {
	if pattern == "" {
		return false
	}
	p, t := units(pattern), units(s)
	// m[i][j]: p[i:] matches t[j:].
	m := make([][]bool, len(p)+1)
	for i := range m {
		m[i] = make([]bool, len(t)+1)
	}
	m[len(p)][len(t)] = true
	for i := len(p) - 1; i >= 0; i-- {
		for j := len(t); j >= 0; j-- {
			switch {
			case p[i] == "*":
				m[i][j] = m[i+1][j] || (j < len(t) && m[i][j+1])
			case j == len(t):
				m[i][j] = false
			case p[i] == "?":
				m[i][j] = m[i+1][j+1]
			default:
				m[i][j] = p[i] == t[j] && m[i+1][j+1]
			}
		}
	}
	return m[0][0]
}

// backtrackMatch is the matcher this package used before: the greedy star
// with backtracking to the most recent star. It is correct but costs
// len(p)·len(s) on a near miss such as "*aaaa…ab"; it stays here as a second,
// independent reference.
func backtrackMatch(p, s string) bool {
	if p == "" {
		return false
	}
	px, sx := 0, 0
	starPx, starSx := -1, 0
	for px < len(p) || sx < len(s) {
		if px < len(p) {
			switch c := p[px]; {
			case c == '*':
				starPx, starSx = px, sx
				px++
				continue
			case sx == len(s):
			case c == '?':
				px++
				_, w := utf8.DecodeRuneInString(s[sx:])
				sx += w
				continue
			default:
				_, pw := utf8.DecodeRuneInString(p[px:])
				_, sw := utf8.DecodeRuneInString(s[sx:])
				if pw == sw && p[px:px+pw] == s[sx:sx+sw] {
					px += pw
					sx += sw
					continue
				}
			}
		}
		if starPx >= 0 && starSx < len(s) {
			_, w := utf8.DecodeRuneInString(s[starSx:])
			starSx += w
			px, sx = starPx+1, starSx
			continue
		}
		return false
	}
	return true
}

// pieces are what random patterns and names are made of: ASCII, '/',
// multi-byte characters, the bytes they are made of on their own, a valid
// U+FFFD next to invalid bytes, and the two wildcards (plain characters in a
// name).
var pieces = []string{
	"a", "b", "/", "é", "\xc3", "\xa9", "日", "\xe6", "\x97", "😀",
	"\ufffd", "\xff", "*", "?",
}

// TestMatchAgainstReferences compares the matcher with the dynamic
// programming reference and the old backtracking matcher on random names and
// patterns. Half the patterns are made from the name (pieces kept, turned
// into wildcards, dropped or swapped, stars inserted), so that many of them
// match or nearly match; the others are drawn on their own.
func TestMatchAgainstReferences(t *testing.T) {
	piece := rapid.SampledFrom(pieces)
	rapid.Check(t, func(t *rapid.T) {
		name := rapid.SliceOfN(piece, 0, 16).Draw(t, "name")
		var pattern []string
		if rapid.Bool().Draw(t, "from name") {
			for _, p := range name {
				switch rapid.IntRange(0, 7).Draw(t, "edit") {
				case 0:
					pattern = append(pattern, "?")
				case 1:
					pattern = append(pattern, "*")
				case 2:
					pattern = append(pattern, "*", p)
				case 3: // dropped
				case 4:
					pattern = append(pattern, piece.Draw(t, "swap"))
				default:
					pattern = append(pattern, p)
				}
			}
		} else {
			pattern = rapid.SliceOfN(piece, 0, 10).Draw(t, "pattern")
		}
		p, s := strings.Join(pattern, ""), strings.Join(name, "")
		want := refMatch(p, s)
		if old := backtrackMatch(p, s); old != want {
			t.Fatalf("the references disagree on (%q, %q): DP %v, backtracking %v", p, s, want, old)
		}
		if got := glob.Match(p, s); got != want {
			t.Fatalf("Match(%q, %q) = %v, reference says %v", p, s, got, want)
		}
		if p != "" {
			if got := glob.MustCompile(p).Match(s); got != want {
				t.Fatalf("Compile(%q).Match(%q) = %v, reference says %v", p, s, got, want)
			}
		}
	})
}

// all returns every string of at most n pieces.
func all(pieces []string, n int) []string {
	out, last := []string{""}, []string{""}
	for range n {
		var next []string
		for _, s := range last {
			for _, p := range pieces {
				next = append(next, s+p)
			}
		}
		out, last = append(out, next...), next
	}
	return out
}

// TestMatchExhaustive checks every short pattern against every short name
// over an alphabet where characters and their bytes meet: é is \xc3\xa9 and
// 日 is \xe6\x97\xa5, so a stray \xc3, \xa9 or \xa5 must not match part of
// them, whichever end of the pattern it sits at and whether a star or a '?'
// stands next to it.
func TestMatchExhaustive(t *testing.T) {
	patterns := all([]string{"é", "\xc3", "\xa9", "\xa5", "*", "?"}, 4)
	names := all([]string{"a", "é", "日", "\xc3", "\xa9", "\xa5"}, 3)
	bad := 0
	for _, p := range patterns {
		for _, s := range names {
			if got, want := glob.Match(p, s), refMatch(p, s); got != want {
				t.Errorf("Match(%q, %q) = %v, reference says %v", p, s, got, want)
				if bad++; bad == 20 {
					t.Fatal("too many failures")
				}
			}
		}
	}
}

// regexpFor translates a valid-UTF-8 pattern into an anchored regexp. (?s)
// lets '.' match '\n'; '.' matches one code point.
func regexpFor(pattern string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString(`(?s)\A`)
	for _, r := range pattern {
		switch r {
		case '*':
			b.WriteString(`.*`)
		case '?':
			b.WriteString(`.`)
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString(`\z`)
	return regexp.MustCompile(b.String())
}

func FuzzMatch(f *testing.F) {
	for _, tt := range matchTests {
		f.Add(tt.pattern, tt.s)
	}
	f.Fuzz(func(t *testing.T, pattern, s string) {
		if len(pattern) > 64 || len(s) > 256 {
			return // keep the reference's quadratic table small
		}
		want := refMatch(pattern, s)
		if old := backtrackMatch(pattern, s); old != want {
			t.Fatalf("the references disagree on (%q, %q): DP %v, backtracking %v", pattern, s, want, old)
		}
		if got := glob.Match(pattern, s); got != want {
			t.Fatalf("Match(%q, %q) = %v, reference says %v", pattern, s, got, want)
		}
		p, err := glob.Compile(pattern)
		if pattern == "" {
			if err == nil {
				t.Fatal(`Compile("") succeeded`)
			}
			return
		}
		if err != nil {
			t.Fatalf("Compile(%q): %v", pattern, err)
		}
		if p.String() != pattern {
			t.Fatalf("String() = %q, want %q", p.String(), pattern)
		}
		if got := p.Match(s); got != want {
			t.Fatalf("Compile(%q).Match(%q) = %v, reference says %v", pattern, s, got, want)
		}
		// A second, independent reference for valid text. regexp reads an
		// invalid byte as U+FFFD, which would let a literal U+FFFD match it,
		// so it only judges valid UTF-8.
		if utf8.ValidString(pattern) && utf8.ValidString(s) {
			if re := regexpFor(pattern).MatchString(s); re != want {
				t.Fatalf("regexp %s on %q = %v, DP reference says %v", regexpFor(pattern), s, re, want)
			}
		}
	})
}

func BenchmarkMatch(b *testing.B) {
	cases := []struct{ name, pattern, s string }{
		{"literal", "nightly/import", "nightly/import"},
		{"prefix", "nightly/*", "nightly/import/2024-06-01"},
		{"question", "shard-??", "shard-31"},
		{"utf8", "日本*?", "日本/語/データ"},
		{"identity", "spiffe://prod/worker/*", "spiffe://prod/worker/eu-west-1/batch-7"},
		{"backtrack", "*a*a*a*b", strings.Repeat("a", 200)},
	}
	cases = append(cases, nearMisses...)
	for _, c := range cases {
		p := glob.MustCompile(c.pattern)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = p.Match(c.s) // b.Loop keeps the call and its result
			}
		})
	}
}

// nearMisses are the names and patterns of the admin API stall: 255-byte
// names that almost match. The backtracking matcher spent about 35µs on each,
// half a second for 15,000 held locks.
var nearMisses = []struct{ name, pattern, s string }{
	{"near-miss/tail", "*" + strings.Repeat("a", 127) + "b", strings.Repeat("a", 255)},
	{"near-miss/middle", "*" + strings.Repeat("a", 127) + "b*", strings.Repeat("a", 255)},
	{"near-miss/long-middle", "*" + strings.Repeat("a", 200) + "b*", strings.Repeat("a", 255)},
	{"near-miss/utf8-tail", "*" + strings.Repeat("日", 40) + "本", strings.Repeat("日", 85)},
	{"near-miss/question", "*" + strings.Repeat("a?", 63) + "b*", strings.Repeat("a", 255)},
}

// BenchmarkNearMiss15k is the whole stalled admin request: one pattern over
// 15,000 held names of 255 bytes, none of which matches.
func BenchmarkNearMiss15k(b *testing.B) {
	names := make([]string, 15_000)
	for i := range names {
		names[i] = strings.Repeat("a", 250) + string(rune('a'+i%26)) + "aaaa"
	}
	p := glob.MustCompile("*" + strings.Repeat("a", 127) + "b")
	b.ReportAllocs()
	for b.Loop() {
		for _, n := range names {
			_ = p.Match(n) // b.Loop keeps the call and its result
		}
	}
}

func TestNearMisses(t *testing.T) {
	for _, c := range nearMisses {
		if got, want := glob.Match(c.pattern, c.s), refMatch(c.pattern, c.s); got != want {
			t.Errorf("%s: Match = %v, reference says %v", c.name, got, want)
		}
	}
}

func TestMatchDoesNotAllocate(t *testing.T) {
	p := glob.MustCompile("spiffe://*/worker/?*")
	s := "spiffe://prod/worker/日本"
	var sink bool // the results, kept so that no call is optimized away
	if n := testing.AllocsPerRun(100, func() { sink = p.Match(s) }); n != 0 {
		t.Errorf("Pattern.Match allocates %v times per call, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { sink = glob.Match("shard-?", "shard-3") }); n != 0 {
		t.Errorf("Match allocates %v times per call, want 0", n)
	}
	for _, c := range nearMisses {
		p := glob.MustCompile(c.pattern)
		if n := testing.AllocsPerRun(10, func() { sink = p.Match(c.s) }); n != 0 {
			t.Errorf("%s: Pattern.Match allocates %v times per call, want 0", c.name, n)
		}
	}
	_ = sink
}

// Cost grows with the string for every pattern but "*", and with the
// string times the part's length only for a '?' between two stars: the
// pattern that took a core for half a minute over 19,000 long names costs
// hundreds of times what an ordinary filter does.
func TestCost(t *testing.T) {
	q200 := strings.Repeat("?", 200)
	for _, c := range []struct {
		pattern string
		n, want int
	}{
		{"*", 255, 1},
		{"***", 255, 1},
		{"nightly/import", 255, 1 + 14 + 255},
		{"a?c", 10, 1 + 3 + 10},
		{"nightly/*", 255, 1 + 8 + 255},
		{"*.lock", 255, 1 + 5 + 255},
		{"*foo*", 255, 1 + 3 + 2*255},
		{"*a?b*", 255, 1 + 3 + 255 + 3*255},
		{"*" + q200 + "b*", 255, 1 + 201 + 255 + 201*255},
		{"a*" + q200 + "*b", 255, 1 + 2 + 200 + 255 + 200*255},
	} {
		if got := glob.MustCompile(c.pattern).Cost(c.n); got != c.want {
			t.Errorf("Cost(%.20q, %d) = %d, want %d", c.pattern, c.n, got, c.want)
		}
	}
	costly := glob.MustCompile("*" + q200 + "b*").Cost(255)
	if plain := glob.MustCompile("*foo*").Cost(255); costly < 100*plain {
		t.Errorf("the costly pattern costs %d, only %d× an ordinary one", costly, costly/plain)
	}
}
