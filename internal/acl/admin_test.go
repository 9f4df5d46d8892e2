package acl

import (
	"strings"
	"testing"
)

const oncall = `{"rules": [
  {"identity": "spiffe://prod/oncall/*", "roles": ["read", "release", "kick"]},
  {"identity": "dashboard.prod.internal", "roles": ["read"]},
  {"identity": "spiffe://prod/*/janitor", "roles": ["kick"]}
]}`

func TestAdminRoles(t *testing.T) {
	r, err := ParseAdmin([]byte(oncall))
	if err != nil {
		t.Fatal(err)
	}
	if r.Len() != 3 {
		t.Errorf("Len = %d, want 3", r.Len())
	}
	for _, c := range []struct {
		identity string
		want     string
	}{
		{"spiffe://prod/oncall/ana", "read, release, kick"},
		{"spiffe://prod/oncall/janitor", "read, release, kick"}, // two rules: the union
		{"spiffe://prod/batch/janitor", "kick"},
		{"dashboard.prod.internal", "read"},
		{"Dashboard.prod.internal", ""}, // case sensitive
		{"dashboard.prod.internal.evil", ""},
		{"spiffe://prod/oncall", ""},
		{"", ""},
	} {
		if got := r.Roles(c.identity).String(); got != c.want {
			t.Errorf("Roles(%q) = %q, want %q", c.identity, got, c.want)
		}
	}
	var none *AdminRules
	if none.Roles("spiffe://prod/oncall/ana") != 0 || none.Len() != 0 {
		t.Error("a nil *AdminRules grants something")
	}
	if got := Role(0).Names(); got == nil || len(got) != 0 {
		t.Errorf("no roles: %#v, want an empty non-nil slice", got)
	}
	if got := strings.Join(AllRoles.Names(), ","); got != "read,release,kick" {
		t.Errorf("AllRoles = %s", got)
	}
}

func TestAdminParseErrors(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     []string
	}{
		{"empty", ``, []string{"empty admin ACL", `"roles"`}},
		{"no rules", `{}`, []string{`missing "rules" list`}},
		{"lock ACL given", `{"rules": [{"identity": "a", "locks": ["*"]}]}`, []string{`unknown field "locks"`, "-admin-acl-file", "grants roles, not locks"}},
		{"unknown role", `{"rules": [{"identity": "a", "roles": ["write"]}]}`, []string{`rules[0]: roles[0]: unknown role "write"`, `"read"`}},
		{"role twice", `{"rules": [{"identity": "a", "roles": ["read", "read"]}]}`, []string{`role "read" appears twice`}},
		{"no roles", `{"rules": [{"identity": "a", "roles": []}]}`, []string{`no "roles" for identity "a"`}},
		{"missing roles", `{"rules": [{"identity": "a"}]}`, []string{`no "roles"`}},
		{"empty identity", `{"rules": [{"identity": "", "roles": ["read"]}]}`, []string{`empty or missing "identity"`}},
		{"case", `{"rules": [{"identity": "a", "Roles": ["read"]}]}`, []string{`field "Roles": field names are case sensitive; write "roles"`}},
		{"duplicate field", `{"rules": [{"identity": "a", "identity": "b", "roles": ["read"]}]}`, []string{`field "identity" appears twice`}},
		{"roles not a list", `{"rules": [{"identity": "a", "roles": "read"}]}`, []string{"rules[0]", "JSON string"}},
		{"null rule", `{"rules": [null]}`, []string{"rules[0]: a rule is null"}},
		{"trailing", `{"rules": []} x`, []string{"unexpected data after the JSON object"}},
	} {
		r, err := ParseAdmin([]byte(c.in))
		if err == nil || r != nil {
			t.Errorf("%s: ParseAdmin = %v, %v; want an error", c.name, r, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", c.name, err, w)
			}
		}
	}
	if r, err := ParseAdmin([]byte(`{"rules": []}`)); err != nil || r.Roles("a") != 0 {
		t.Errorf(`{"rules": []}: %v, %v; want valid, granting nothing`, r, err)
	}
}

func TestLoadAdminNamesTheFile(t *testing.T) {
	if _, err := LoadAdmin("/nonexistent/admin-acl.json"); err == nil || !strings.Contains(err.Error(), "admin ACL file /nonexistent/admin-acl.json") {
		t.Errorf("LoadAdmin: %v", err)
	}
}
