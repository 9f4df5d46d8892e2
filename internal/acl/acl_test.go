package acl

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// acceptance is the acceptance ACL.
const acceptance = `{"rules": [
  {"identity": "spiffe://lab/worker/*", "locks": ["nightly/*", "shard-?"]},
  {"identity": "worker.dns.local", "locks": ["dns-*"]},
  {"identity": "cn-worker", "locks": ["cn"]}
]}`

const (
	uriID = "spiffe://lab/worker/7"
	dnsID = "worker.dns.local"
	cnID  = "cn-worker"
)

func mustParse(t *testing.T, s string) *Rules {
	t.Helper()
	r, err := Parse([]byte(s))
	if err != nil {
		t.Fatalf("Parse(%s): %v", s, err)
	}
	return r
}

type decision struct {
	identity, lock string
	want           bool
}

func check(t *testing.T, r *Rules, cases []decision) {
	t.Helper()
	for _, c := range cases {
		if got := r.Allowed(c.identity, c.lock); got != c.want {
			t.Errorf("Allowed(%q, %q) = %v, want %v", c.identity, c.lock, got, c.want)
		}
	}
}

var locks = []string{"nightly/a/b", "nightly/", "nightly", "shard-3", "shard-31", "shard-", "shard-é", "dns-x", "dns-", "cn", "cnx", "other", ""}

// allowedLocks is the acceptance table: identity → the locks of
// `locks` it may take.
var allowedLocks = map[string][]string{
	uriID:                     {"nightly/a/b", "nightly/", "shard-3", "shard-é"},
	"spiffe://lab/worker/":    {"nightly/a/b", "nightly/", "shard-3", "shard-é"},
	"spiffe://lab/worker/7/x": {"nightly/a/b", "nightly/", "shard-3", "shard-é"},
	dnsID:                     {"dns-x", "dns-"},
	cnID:                      {"cn"},
	"":                        nil,
	"spiffe://lab/other/7":    nil,
	"SPIFFE://lab/worker/7":   nil,
	"Worker.dns.local":        nil,
	"x.worker.dns.local":      nil,
	"cn-worker2":              nil,
}

func TestAcceptanceTable(t *testing.T) {
	r := mustParse(t, acceptance)
	if r.Len() != 3 {
		t.Errorf("Len = %d, want 3", r.Len())
	}
	for id, allowed := range allowedLocks {
		for _, lock := range locks {
			want := false
			for _, a := range allowed {
				want = want || a == lock
			}
			if got := r.Allowed(id, lock); got != want {
				t.Errorf("Allowed(%q, %q) = %v, want %v", id, lock, got, want)
			}
		}
	}
}

func TestUnionOfMatchingRules(t *testing.T) {
	r := mustParse(t, `{"rules": [
	  {"identity": "spiffe://lab/*", "locks": ["common"]},
	  {"identity": "spiffe://lab/worker/*", "locks": ["nightly/*"]},
	  {"identity": "spiffe://lab/worker/7", "locks": ["seven", "shard-7"]},
	  {"identity": "spiffe://lab/worker/7", "locks": ["also-seven"]},
	  {"identity": "spiffe://lab/db/*", "locks": ["db"]}
	]}`)
	check(t, r, []decision{
		{uriID, "common", true},
		{uriID, "nightly/x", true},
		{uriID, "seven", true},
		{uriID, "shard-7", true},
		{uriID, "also-seven", true},
		{uriID, "db", false},
		{"spiffe://lab/worker/8", "seven", false},
		{"spiffe://lab/worker/8", "nightly/x", true},
		{"spiffe://lab/db/1", "db", true},
		{"spiffe://lab/db/1", "common", true},
		{"spiffe://lab/db/1", "nightly/x", false},
	})
}

func TestOrderIsMeaningless(t *testing.T) {
	rules := []string{
		`{"identity": "spiffe://lab/worker/*", "locks": ["nightly/*", "shard-?"]}`,
		`{"identity": "worker.dns.local", "locks": ["dns-*"]}`,
		`{"identity": "cn-worker", "locks": ["cn"]}`,
		`{"identity": "*", "locks": ["public/*"]}`,
		`{"identity": "spiffe://lab/worker/7", "locks": ["seven"]}`,
	}
	ids := []string{uriID, "spiffe://lab/worker/8", dnsID, cnID, "", "nobody"}
	probe := append([]string{"public/x", "seven"}, locks...)
	var reference map[[2]string]bool
	permute(len(rules), func(order []int) {
		parts := make([]string, len(order))
		for i, o := range order {
			parts[i] = rules[o]
		}
		r := mustParse(t, `{"rules": [`+strings.Join(parts, ",")+`]}`)
		got := map[[2]string]bool{}
		for _, id := range ids {
			for _, l := range probe {
				got[[2]string{id, l}] = r.Allowed(id, l)
			}
		}
		if reference == nil {
			reference = got
			return
		}
		for k, v := range got {
			if reference[k] != v {
				t.Fatalf("order %v: Allowed(%q, %q) = %v, but %v in the first order", order, k[0], k[1], v, reference[k])
			}
		}
	})
}

// permute calls f with every permutation of 0..n-1 (Heap's algorithm).
func permute(n int, f func([]int)) {
	a := make([]int, n)
	for i := range a {
		a[i] = i
	}
	var gen func(k int)
	gen = func(k int) {
		if k == 1 {
			f(a)
			return
		}
		for i := 0; i < k-1; i++ {
			gen(k - 1)
			if k%2 == 0 {
				a[i], a[k-1] = a[k-1], a[i]
			} else {
				a[0], a[k-1] = a[k-1], a[0]
			}
		}
		gen(k - 1)
	}
	gen(n)
}

func TestEmptyRulesDenyEverything(t *testing.T) {
	for _, in := range []string{`{"rules": []}`, " \n{\"rules\":[]}\n\n"} {
		r := mustParse(t, in)
		if r == nil || r.Len() != 0 {
			t.Fatalf("Parse(%q) = %v, want an empty list", in, r)
		}
		check(t, r, []decision{{uriID, "nightly/x", false}, {"", "", false}, {"admin", "*", false}})
	}
}

func TestEmptyIdentityIsNeverAllowed(t *testing.T) {
	r := mustParse(t, `{"rules": [{"identity": "*", "locks": ["*"]}]}`)
	check(t, r, []decision{{"", "x", false}, {"anyone", "x", true}, {"anyone", "", true}})
}

func TestNilRulesAllowEverything(t *testing.T) {
	var r *Rules
	check(t, r, []decision{{"", "x", true}, {uriID, "nightly/x", true}})
	if r.Len() != 0 {
		t.Errorf("nil Len = %d", r.Len())
	}
}

func TestGlobLanguage(t *testing.T) {
	r := mustParse(t, `{"rules": [
	  {"identity": "a?c", "locks": ["x?z", "lit[1]", "pre*post", "ünï?ode"]},
	  {"identity": "Case", "locks": ["Lock"]}
	]}`)
	check(t, r, []decision{
		{"abc", "xyz", true},
		{"aéc", "xéz", true}, // ? is one code point, not one byte
		{"ac", "xyz", false},
		{"abbc", "xyz", false},
		{"abc", "lit[1]", true}, // no character classes
		{"abc", "lit1", false},
		{"abc", "prepost", true},
		{"abc", "pre/a/b/post", true}, // * crosses /
		{"abc", "pre/a/b/post/", false},
		{"abc", "ünïcode", true},
		{"Case", "Lock", true},
		{"case", "Lock", false},
		{"Case", "lock", false},
		{"xabc", "xyz", false}, // whole-string
	})
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name, in string
		want     []string
	}{
		{"empty file", ``, []string{"empty ACL"}},
		{"white space", " \n\t", []string{"empty ACL"}},
		{"invalid JSON", "{\"rules\": [\n  {\"identity\": \"a\",, }]}", []string{"invalid JSON at line 2, column 20"}},
		{"unterminated", `{"rules": [{"identity": "a"`, []string{"invalid JSON", "unexpected end"}},
		{"not an object", `[]`, []string{"JSON array", "must be a JSON object"}},
		{"string", `"rules"`, []string{"JSON string", "must be a JSON object"}},
		{"missing rules", `{}`, []string{`missing "rules"`}},
		{"null", `null`, []string{`missing "rules"`}},
		{"null rules", `{"rules": null}`, []string{`missing "rules"`}},
		{"rules not a list", `{"rules": {}}`, []string{`"rules" must be a list`}},
		{"unknown top-level field", `{"rules": [], "deny": []}`, []string{`unknown field "deny"`, `"rules"`}},
		{"top-level field in the wrong case", `{"Rules": []}`, []string{`field "Rules"`, "case sensitive", `write "rules"`}},
		{"duplicate top-level field", `{"rules": [], "rules": []}`, []string{`field "rules" appears twice`}},
		{"unknown field in a rule", `{"rules": [{"identity": "a", "locks": ["x"]}, {"identity": "a", "locks": ["x"], "deny": true}]}`, []string{"rules[1]", `unknown field "deny"`, `"identity" and "locks"`}},
		{"rule field in the wrong case", `{"rules": [{"Identity": "a", "locks": ["x"]}]}`, []string{"rules[0]", `field "Identity"`, `write "identity"`}},
		{"duplicate rule field", `{"rules": [{"identity": "a", "locks": ["x"], "identity": "b"}]}`, []string{"rules[0]", `field "identity" appears twice`}},
		{"rule not an object", `{"rules": ["a"]}`, []string{"rules[0]", "JSON string", "a rule must be an object"}},
		{"null rule", `{"rules": [null]}`, []string{"rules[0]", "null"}},
		{"empty identity", `{"rules": [{"identity": "a", "locks": ["x"]}, {"identity": "", "locks": ["x"]}]}`, []string{"rules[1]", `"identity"`}},
		{"missing identity", `{"rules": [{"locks": ["x"]}]}`, []string{"rules[0]", `"identity"`}},
		{"identity not a string", `{"rules": [{"identity": ["a"], "locks": ["x"]}]}`, []string{"rules[0]", `"identity" must be a string`}},
		{"no locks", `{"rules": [{"identity": "a"}]}`, []string{"rules[0]", `no "locks"`, `"a"`}},
		{"empty locks", `{"rules": [{"identity": "a", "locks": []}]}`, []string{"rules[0]", `no "locks"`}},
		{"null locks", `{"rules": [{"identity": "a", "locks": null}]}`, []string{"rules[0]", `no "locks"`}},
		{"empty lock pattern", `{"rules": [{"identity": "a", "locks": ["x"]}, {"identity": "b", "locks": ["y", ""]}]}`, []string{"rules[1]", "locks[1]", "empty lock pattern"}},
		{"locks not a list", `{"rules": [{"identity": "a", "locks": "x"}]}`, []string{"rules[0]", `"locks" must be a list`}},
		{"lock not a string", `{"rules": [{"identity": "a", "locks": [7]}]}`, []string{"rules[0]", `"locks" must be a list`}},
		{"trailing garbage", `{"rules": []} garbage`, []string{"unexpected data after the JSON object", "line 1, column 15"}},
		{"second object", "{\"rules\": []}\n{\"rules\": []}", []string{"unexpected data after the JSON object", "line 2, column 1"}},
		{"trailing comma", `{"rules": [],}`, []string{"invalid JSON"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := Parse([]byte(c.in))
			if err == nil {
				t.Fatalf("Parse(%q) = %d rules, want an error", c.in, r.Len())
			}
			if r != nil {
				t.Errorf("Parse returned rules with the error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q is not one line", err)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "acl.json")
	if err := os.WriteFile(good, []byte(acceptance), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Load(good)
	if err != nil {
		t.Fatal(err)
	}
	if r.Len() != 3 || !r.Allowed(uriID, "shard-3") {
		t.Errorf("Load: %d rules", r.Len())
	}

	missing := filepath.Join(dir, "missing.json")
	if _, err := Load(missing); err == nil || !strings.Contains(err.Error(), "ACL file "+missing) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}

	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"rules": [{"identity": "a"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(bad); err == nil || !strings.Contains(err.Error(), "ACL file "+bad+": rules[0]") {
		t.Errorf("bad file: %v", err)
	}
}
