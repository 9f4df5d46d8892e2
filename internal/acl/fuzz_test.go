package acl

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/monolock/monolock/internal/glob"
)

// FuzzParse checks that Parse never panics, that its errors are one line,
// and that whatever it accepts decides exactly as a plain reading of the JSON
// with glob.Match does (and never panics doing so). The committed corpus is
// in testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Add([]byte(acceptance), uriID, "shard-3")
	f.Add([]byte(acceptance), dnsID, "dns-x")
	f.Add([]byte(`{"rules": []}`), "", "")
	f.Add([]byte(`{"rules": [{"identity": "*", "locks": ["*"]}]}`), "", "x")
	f.Add([]byte(`{"rules": [{"identity": "a?c", "locks": ["?*?"]}]} x`), "abc", "é")
	f.Add([]byte(`{"Rules": [{"identity": "a", "identity": "b", "locks": [""]}]}`), "a", "b")
	f.Fuzz(func(t *testing.T, data []byte, identity, lock string) {
		r, err := Parse(data)
		if err != nil {
			if r != nil {
				t.Fatalf("Parse returned rules and the error %v", err)
			}
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("error is not one line: %q", err)
			}
			return
		}
		var plain struct {
			Rules []struct {
				Identity string   `json:"identity"`
				Locks    []string `json:"locks"`
			} `json:"rules"`
		}
		if err := json.Unmarshal(data, &plain); err != nil {
			t.Fatalf("Parse accepted what json.Unmarshal rejects: %v", err)
		}
		if r.Len() != len(plain.Rules) {
			t.Fatalf("Len = %d, the JSON has %d rules", r.Len(), len(plain.Rules))
		}
		want := false
		for _, ru := range plain.Rules {
			if ru.Identity == "" || len(ru.Locks) == 0 {
				t.Fatalf("Parse accepted a rule without identity or locks: %+v", ru)
			}
			for _, l := range ru.Locks {
				if l == "" {
					t.Fatalf("Parse accepted an empty lock pattern: %+v", ru)
				}
				if identity != "" && glob.Match(ru.Identity, identity) && glob.Match(l, lock) {
					want = true
				}
			}
		}
		if got := r.Allowed(identity, lock); got != want {
			t.Fatalf("Allowed(%q, %q) = %v, want %v", identity, lock, got, want)
		}
		for _, ru := range plain.Rules {
			for _, l := range ru.Locks {
				// A rule's own patterns, taken literally, match themselves
				// when they contain no wildcard.
				if !strings.ContainsAny(ru.Identity+l, "*?") && !r.Allowed(ru.Identity, l) {
					t.Fatalf("Allowed(%q, %q) = false for a literal rule", ru.Identity, l)
				}
			}
		}
	})
}
