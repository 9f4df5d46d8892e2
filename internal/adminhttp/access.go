package adminhttp

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/monolock/monolock/internal/acl"
	"github.com/monolock/monolock/internal/certs"
)

// Access decides who a caller is and which admin roles it has. It is safe
// for concurrent use; SetRules swaps the rules for the calls that follow
// (SIGHUP).
type Access struct {
	certified bool // identities come from verified client certificates
	rules     atomic.Pointer[acl.AdminRules]
}

// OpenAccess is the access of an admin port without mutual TLS: every caller
// has the empty identity and every role. Serve it on loopback only (or where
// the operator has accepted the risk).
func OpenAccess() *Access { return &Access{} }

// CertAccess is the access of an admin port with mutual TLS: a caller's
// identity is its verified client certificate's (certs.Identity) and its
// roles are what rules grant that identity; everything else is denied.
func CertAccess(rules *acl.AdminRules) *Access {
	a := &Access{certified: true}
	a.rules.Store(rules)
	return a
}

// SetRules replaces the rules of a CertAccess; calls already admitted keep
// their decision.
func (a *Access) SetRules(rules *acl.AdminRules) { a.rules.Store(rules) }

// Caller is the identity and the roles of a request's caller.
func (a *Access) Caller(r *http.Request) (identity string, roles acl.Role) {
	if a == nil || !a.certified {
		return "", acl.AllRoles
	}
	if r.TLS == nil {
		return "", 0
	}
	identity = certs.Identity(*r.TLS)
	return identity, a.rules.Load().Roles(identity)
}

// Refusals counts admin calls refused for want of a role, by role name
// (internal/metrics' AdminMetrics).
type Refusals interface {
	AdminRefused(role string)
}

// refusalsPerSecond bounds the log lines of refused calls, as the event loop
// bounds its ACL denials; the metric counts every one.
const refusalsPerSecond = 10

// newRefusalLog samples log for the refused calls: a script retrying in a
// loop must not flood the diagnostics.
func newRefusalLog(log zerolog.Logger) zerolog.Logger {
	return log.Sample(&zerolog.BurstSampler{Burst: refusalsPerSecond, Period: time.Second})
}

// refuse answers 403 to a caller without role, saying which role is missing
// and how to grant it; it logs (sampled) and counts the refusal.
func (h *handler) refuse(w http.ResponseWriter, r *http.Request, identity string, has, role acl.Role) {
	name := role.String()
	if h.info.Refusals != nil {
		h.info.Refusals.AdminRefused(name)
	}
	if e := h.refusalLog.Warn(); e.Enabled() {
		e.Str("identity", identity).Str("remote", r.RemoteAddr).Str("method", r.Method).Str("path", clip(r.URL.EscapedPath())).
			Str("role", name).Msg("admin call refused: the caller lacks the role it needs")
	}
	call := r.Method + " " + clip(r.URL.EscapedPath())
	if identity == "" {
		writeError(w, http.StatusForbidden, fmt.Sprintf("%s needs the admin role %q, and the client certificate names no identity (no URI SAN, DNS SAN or Common Name): use a certificate that names the operator, and have its identity granted %q in the admin ACL file (-admin-acl-file)", call, name, name))
		return
	}
	hasText := "no role"
	if has != 0 {
		hasText = "only " + strings.Join(has.Names(), ", ")
	}
	writeError(w, http.StatusForbidden, fmt.Sprintf(`%s needs the admin role %q, and identity %s has %s: add {"identity": %s, "roles": [%q]} (or a pattern matching it) to the admin ACL file (-admin-acl-file) and send the server SIGHUP`, call, name, quote(identity), hasText, quote(identity), name))
}
