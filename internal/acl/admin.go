package acl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/monolock/monolock/internal/glob"
	"github.com/monolock/monolock/protocol/admin"
)

// The admin ACL says which operator identity has which roles on the admin
// API. It is a file of its own (-admin-acl-file), in the same strict JSON as
// the ACL:
//
//	{"rules": [
//	  {"identity": "spiffe://prod/oncall/*", "roles": ["read", "release", "kick"]},
//	  {"identity": "dashboard.prod.internal", "roles": ["read"]}
//	]}
//
// An identity's roles are the union of the roles of every rule whose
// identity pattern matches it; anything else is denied. The empty identity
// has no role.

// Role is a set of admin roles.
type Role uint8

// The admin roles, in their canonical order.
const (
	RoleRead    Role = 1 << iota // the GET endpoints
	RoleRelease                  // force-release
	RoleKick                     // remove a waiter

	AllRoles = RoleRead | RoleRelease | RoleKick
)

// roleNames are the roles' names on the wire and in the file, in order.
var roleNames = [...]struct {
	role Role
	name string
}{{RoleRead, admin.RoleRead}, {RoleRelease, admin.RoleRelease}, {RoleKick, admin.RoleKick}}

// Has reports whether r holds every role of want.
func (r Role) Has(want Role) bool { return r&want == want }

// Names are the roles of r in canonical order (read, release, kick); an
// empty, non-nil slice when r is empty, so that it encodes as [].
func (r Role) Names() []string {
	names := make([]string, 0, len(roleNames))
	for _, rn := range roleNames {
		if r.Has(rn.role) {
			names = append(names, rn.name)
		}
	}
	return names
}

// String is the roles' names joined by ", ".
func (r Role) String() string { return strings.Join(r.Names(), ", ") }

// AdminRules is a compiled admin ACL. It is immutable and safe for
// concurrent use. A nil *AdminRules grants nothing.
type AdminRules struct {
	rules []adminRule
}

type adminRule struct {
	identity glob.Pattern
	roles    Role
}

// Roles is every role the rules grant identity; none for the empty one.
func (a *AdminRules) Roles(identity string) Role {
	var r Role
	if a == nil || identity == "" {
		return r
	}
	for _, ru := range a.rules {
		if ru.roles&^r != 0 && ru.identity.Match(identity) {
			r |= ru.roles
		}
	}
	return r
}

// Len is the number of rules; 0 for nil.
func (a *AdminRules) Len() int {
	if a == nil {
		return 0
	}
	return len(a.rules)
}

const (
	fieldRoles   = "roles"
	adminExample = `{"rules": [{"identity": "spiffe://prod/oncall/*", "roles": ["read", "release", "kick"]}]}`
)

// LoadAdmin reads and parses the admin ACL file at path. Errors name the
// file.
func LoadAdmin(path string) (*AdminRules, error) { return load(path, "admin ACL", ParseAdmin) }

// ParseAdmin parses and compiles an admin ACL. An empty "rules" list is
// valid and denies every call that needs a role.
func ParseAdmin(data []byte) (*AdminRules, error) {
	rules, err := parseRules(data, "admin ACL", adminExample, parseAdminRule)
	if err != nil {
		return nil, err
	}
	return &AdminRules{rules: rules}, nil
}

const adminRuleShape = `a rule must be an object {"identity": "PATTERN", "roles": ["read", "release", "kick"]}`

func parseAdminRule(raw json.RawMessage) (adminRule, error) {
	var in struct {
		Identity *string   `json:"identity"`
		Roles    *[]string `json:"roles"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		if isUnknownField(err) {
			if kerr := checkKeys(raw, fieldIdentity, fieldRoles); kerr != nil {
				if unknown, ok := errors.AsType[*unknownFieldError](kerr); ok && unknown.field == fieldLocks {
					kerr = fmt.Errorf("%w (is the lock ACL given as -admin-acl-file? The admin ACL grants roles, not locks)", kerr)
				}
				return adminRule{}, kerr
			}
		}
		return adminRule{}, jsonError(raw, err, adminRuleShape)
	}
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return adminRule{}, errors.New("a rule is null; write " + strings.TrimPrefix(adminRuleShape, "a rule must be an object "))
	}
	if err := checkKeys(raw, fieldIdentity, fieldRoles); err != nil {
		return adminRule{}, err
	}
	if in.Identity == nil || *in.Identity == "" {
		return adminRule{}, errors.New(`empty or missing "identity": give the operator identity pattern the rule is for, such as "spiffe://prod/oncall/*" (use "*" for every client with a certificate)`)
	}
	id, err := glob.Compile(*in.Identity)
	if err != nil {
		return adminRule{}, fmt.Errorf(`"identity": %w`, err)
	}
	if in.Roles == nil || len(*in.Roles) == 0 {
		return adminRule{}, fmt.Errorf(`no "roles" for identity %q: give at least one of "read", "release" and "kick"`, *in.Identity)
	}
	ru := adminRule{identity: id}
	for j, name := range *in.Roles {
		r, ok := roleNamed(name)
		if !ok {
			return adminRule{}, fmt.Errorf(`roles[%d]: unknown role %q; the roles are "read" (the GET endpoints), "release" (force-release) and "kick" (remove a waiter)`, j, snippet([]byte(name)))
		}
		if ru.roles.Has(r) {
			return adminRule{}, fmt.Errorf("roles[%d]: role %q appears twice; keep one", j, name)
		}
		ru.roles |= r
	}
	return ru, nil
}

func roleNamed(name string) (Role, bool) {
	for _, rn := range roleNames {
		if rn.name == name {
			return rn.role, true
		}
	}
	return 0, false
}
