// Package acl is monolock's access-control lists: which client identity may
// ACQUIRE which lock (Rules, the -acl-file), and which operator identity has
// which role on the admin API (AdminRules, the -admin-acl-file; see
// admin.go).
//
// The file is JSON:
//
//	{"rules": [
//	  {"identity": "spiffe://prod/worker/*", "locks": ["nightly/*", "shard-?"]},
//	  {"identity": "admin.svc.cluster.local", "locks": ["*"]}
//	]}
//
// Identity and lock patterns are globs (package glob: '*' any run of
// characters including '/', '?' one character, whole-string, case
// sensitive). Access is denied by default; a lock is allowed when any rule
// whose identity pattern matches the client has a lock pattern that matches
// the lock's name. Order is meaningless; there are no deny rules and no
// priorities. The empty identity (no client certificate, or a certificate
// naming nobody) is never allowed anything.
//
// Parsing is strict: unknown or misspelt fields (field names are case
// sensitive), duplicate fields, a missing "rules" list, values of the wrong
// type, empty patterns and anything after the JSON object are errors that
// say which rule is at fault and what to fix.
package acl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/monolock/monolock/internal/conffile"
	"github.com/monolock/monolock/internal/glob"
	"github.com/monolock/monolock/protocol"
)

// Rules is a compiled access-control list. It is immutable and safe for
// concurrent use. A nil *Rules means no ACL is configured: it allows
// everything.
type Rules struct {
	rules []rule
}

type rule struct {
	identity glob.Pattern
	locks    []glob.Pattern
}

// Allowed reports whether identity may acquire lock: true if any rule whose
// identity pattern matches identity has a lock pattern that matches lock.
// The empty identity is never allowed (on a non-nil Rules).
func (r *Rules) Allowed(identity, lock string) bool {
	if r == nil {
		return true
	}
	if identity == "" {
		return false
	}
	for i := range r.rules {
		ru := &r.rules[i]
		if !ru.identity.Match(identity) {
			continue
		}
		for _, l := range ru.locks {
			if l.Match(lock) {
				return true
			}
		}
	}
	return false
}

// Len is the number of rules; 0 for nil.
func (r *Rules) Len() int {
	if r == nil {
		return 0
	}
	return len(r.rules)
}

// Load reads and parses the ACL file at path. Errors name the file.
func Load(path string) (*Rules, error) { return load(path, "ACL", Parse) }

// MaxFileSize caps an ACL file (either kind), in bytes: some 20,000 rules.
// A larger file, or a path that names no regular file (a FIFO, a device), is
// refused before it is read, at start and on SIGHUP.
const MaxFileSize = 4 << 20

// load reads the file at path and parses it; errors name it as what.
func load[T any](path, what string, parse func([]byte) (*T, error)) (*T, error) {
	data, err := conffile.Read(path, MaxFileSize)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("%s file %s: %w", what, path, err)
	}
	r, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s file %s: %w", what, path, err)
	}
	return r, nil
}

// The JSON field names, which must be spelt exactly so.
const (
	fieldRules    = "rules"
	fieldIdentity = "identity"
	fieldLocks    = "locks"
)

const example = `{"rules": [{"identity": "spiffe://lab/worker/*", "locks": ["nightly/*"]}]}`

// Parse parses and compiles an ACL (see the package documentation for the
// format). An empty "rules" list is valid and denies everything.
func Parse(data []byte) (*Rules, error) {
	rules, err := parseRules(data, "ACL", example, parseRule)
	if err != nil {
		return nil, err
	}
	return &Rules{rules: rules}, nil
}

// parseRules checks the file's frame (parseRuleList) and parses each rule,
// naming the one at fault.
func parseRules[R any](data []byte, what, example string, parse func(json.RawMessage) (R, error)) ([]R, error) {
	raws, err := parseRuleList(data, what, example)
	if err != nil {
		return nil, err
	}
	rules := make([]R, 0, len(raws))
	for i, raw := range raws {
		ru, err := parse(raw)
		if err != nil {
			return nil, fmt.Errorf("rules[%d]: %w", i, err)
		}
		rules = append(rules, ru)
	}
	return rules, nil
}

// parseRuleList checks the file's frame, one object holding exactly a
// "rules" list, and returns the list's elements; what names the file and
// example is a valid one, for the error messages.
func parseRuleList(data []byte, what, example string) ([]json.RawMessage, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("empty %s: write %s (or {\"rules\": []} to deny everything)", what, example)
	}
	var top struct {
		Rules *[]json.RawMessage `json:"rules"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&top); err != nil {
		if isUnknownField(err) {
			if kerr := checkKeys(data, fieldRules); kerr != nil {
				return nil, kerr
			}
		}
		return nil, jsonError(data, err, "the "+what+" must be a JSON object: "+example)
	}
	if err := checkTrailing(data, dec); err != nil {
		return nil, err
	}
	if err := checkKeys(data, fieldRules); err != nil {
		return nil, err
	}
	if top.Rules == nil {
		return nil, fmt.Errorf(`missing "rules" list: write %s (or {"rules": []} to deny everything)`, example)
	}
	return *top.Rules, nil
}

func parseRule(raw json.RawMessage) (rule, error) {
	var in struct {
		Identity *string   `json:"identity"`
		Locks    *[]string `json:"locks"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		if isUnknownField(err) {
			if kerr := checkKeys(raw, fieldIdentity, fieldLocks); kerr != nil {
				return rule{}, kerr
			}
		}
		return rule{}, jsonError(raw, err, `a rule must be an object {"identity": "PATTERN", "locks": ["PATTERN", ...]}`)
	}
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return rule{}, errors.New(`a rule is null; write {"identity": "PATTERN", "locks": ["PATTERN", ...]}`)
	}
	if err := checkKeys(raw, fieldIdentity, fieldLocks); err != nil {
		return rule{}, err
	}
	if in.Identity == nil || *in.Identity == "" {
		return rule{}, errors.New(`empty or missing "identity": give the client identity pattern the rule is for, such as "spiffe://lab/worker/*" (use "*" for every client with a certificate)`)
	}
	id, err := glob.Compile(*in.Identity)
	if err != nil {
		return rule{}, fmt.Errorf(`"identity": %w`, err)
	}
	if in.Locks == nil || len(*in.Locks) == 0 {
		return rule{}, fmt.Errorf(`no "locks" for identity %q: give at least one lock pattern, such as ["nightly/*"] (use ["*"] for every lock)`, *in.Identity)
	}
	ru := rule{identity: id, locks: make([]glob.Pattern, 0, len(*in.Locks))}
	for j, l := range *in.Locks {
		if l == "" {
			return rule{}, fmt.Errorf(`locks[%d]: empty lock pattern: give a lock name or pattern, such as "nightly/*" (use "*" for every lock)`, j)
		}
		p, err := glob.Compile(l)
		if err != nil {
			return rule{}, fmt.Errorf("locks[%d]: %w", j, err)
		}
		ru.locks = append(ru.locks, p)
	}
	return ru, nil
}

// checkTrailing fails when anything but white space follows the first JSON
// value.
func checkTrailing(data []byte, dec *json.Decoder) error {
	off := dec.InputOffset()
	if len(bytes.TrimSpace(data[off:])) == 0 {
		return nil
	}
	rest := bytes.TrimLeft(data[off:], " \t\r\n")
	pos := len(data) - len(rest)
	line, col := position(data, pos)
	return fmt.Errorf("unexpected data after the JSON object at line %d, column %d (%q); the file must hold exactly one object", line, col, snippet(rest))
}

// unknownFieldError is a field that a rule does not have, so that a caller
// can say more about a field it recognizes from another kind of file.
type unknownFieldError struct {
	field   string
	allowed []string
}

func (e *unknownFieldError) Error() string {
	return fmt.Sprintf("unknown field %q; the fields are %s", e.field, quoteAll(e.allowed))
}

// checkKeys fails on a duplicate key in the JSON object data, or on a key
// that is not spelt exactly as one of allowed (encoding/json matches field
// names case-insensitively; the ACL does not). data has already been decoded
// successfully, so it is a valid object or null.
func checkKeys(data []byte, allowed ...string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil // null: nothing to check
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		if !contains(allowed, key) {
			for _, a := range allowed {
				if strings.EqualFold(a, key) {
					return fmt.Errorf("field %q: field names are case sensitive; write %q", key, a)
				}
			}
			return &unknownFieldError{field: key, allowed: allowed}
		}
		if seen[key] {
			return fmt.Errorf("field %q appears twice; keep one", key)
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return err
		}
	}
	return nil
}

// isUnknownField reports whether err is DisallowUnknownFields' complaint
// (encoding/json has no error type for it).
func isUnknownField(err error) bool {
	return strings.HasPrefix(err.Error(), "json: unknown field ")
}

// jsonError turns an encoding/json error into one line that says where and
// what to fix.
func jsonError(data []byte, err error, shape string) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return errors.New("empty: " + shape)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("invalid JSON: unexpected end of input (an unclosed bracket or string?)")
	case errors.As(err, &se):
		// Offset counts the offending byte itself.
		line, col := position(data, int(se.Offset)-1)
		return fmt.Errorf("invalid JSON at line %d, column %d: %v", line, col, strings.TrimPrefix(se.Error(), "json: "))
	case errors.As(err, &te):
		switch te.Field {
		case "":
			return fmt.Errorf("got a JSON %s: %s", te.Value, shape)
		case fieldRules:
			return fmt.Errorf(`"rules" must be a list of rules, got a JSON %s`, te.Value)
		case fieldIdentity:
			return fmt.Errorf(`"identity" must be a string pattern, got a JSON %s`, te.Value)
		case fieldLocks:
			return fmt.Errorf(`"locks" must be a list of string patterns, got a JSON %s`, te.Value)
		}
		if strings.HasPrefix(te.Field, fieldLocks) {
			return fmt.Errorf(`"locks" must be a list of string patterns, got a JSON %s in it`, te.Value)
		}
		return fmt.Errorf("field %q: got a JSON %s: %s", te.Field, te.Value, shape)
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return fmt.Errorf("unknown field %s; %s", f, shape)
	}
	return fmt.Errorf("invalid JSON: %v", strings.TrimPrefix(err.Error(), "json: "))
}

// position is the 1-based line and column (in bytes) of offset off in data.
func position(data []byte, off int) (line, col int) {
	if off > len(data) {
		off = len(data)
	}
	if off < 0 {
		off = 0
	}
	before := data[:off]
	line = 1 + bytes.Count(before, []byte("\n"))
	col = off - bytes.LastIndexByte(before, '\n')
	return line, col
}

func snippet(b []byte) string {
	const max = 20
	s := string(b)
	if cut := protocol.CutUTF8(s, max); cut != s {
		return cut + "…"
	}
	return s
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

func quoteAll(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, " and ")
}
