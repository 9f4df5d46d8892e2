// Package adminhttp is monolock's admin HTTP API: it lists locks with their
// holders and queues, force-releases a lock and kicks a waiter; and it
// serves the live console that does the same in a browser (package console).
//
//	GET    /                                          the console (no role needed: it holds no data)
//	GET    /api/whoami                                the caller's identity and roles (no role needed)
//	GET    /api/info                                  version, uptime, effective config, counts (read)
//	GET    /api/locks[?match=GLOB][&limit=N&after=X]  {"locks": [...], "total", "next"}: held locks, sorted by name (read)
//	GET    /api/locks/{name}                          one lock; 404 when idle (read)
//	POST   /api/locks/{name}/release                  force-release: holder gets ERROR 0x02 (release)
//	DELETE /api/locks/{name}/waiters/{remote_addr}    kick one waiter: it gets ERROR 0x02 (kick)
//
// Lock names may contain '/', so {name} and {remote_addr} are single,
// percent-encoded path segments ("nightly%2Fimport"). Routing is an
// http.ServeMux, which splits the escaped path and decodes each segment on
// its own, so an encoded '/' stays in the name and "%2E%2E" is the name "..".
// A path with an empty, "." or ".." segment is a 404, not a redirect to its
// cleaned form. Error messages repeat at most 64 bytes of a path, name or
// address. A malformed escape in the path ("%zz") never reaches the
// handler: net/http answers it with its own plain-text 400. Mount the
// handler at the root of its own http.Server.
//
// Who may call what is Info.Access: without mutual TLS (OpenAccess) every
// caller has every role, so such a port belongs on loopback; with it
// (CertAccess) each endpoint needs the role shown above, granted to the
// caller's certificate identity by the admin ACL, and a caller without it
// gets 403 saying which role is missing and how to grant it. Refused calls
// are logged (sampled) and counted (Info.Refusals). Force-release and kick
// pass the caller's identity to the server as the operator, for the audit
// log.
//
// Every read and change goes through the server's owner loop (Backend);
// each call is bounded by the request's context and by CallTimeout. The
// lock list is filtered and sorted here, off the loop.
//
// The JSON bodies are declared in protocol/admin. Errors are JSON objects
// {"error": "…"} (admin.ErrorResponse) saying what was wrong and what to
// do, with status 400 (bad request, or a ?match= pattern too costly for
// MatchBudget), 403 (the caller lacks the role, or a browser sent a change
// from another site's page), 404 (no such lock, waiter or path), 405 (wrong
// method, with an Allow header) or 503 (the server did not answer). Every
// answer carries the security headers a browser needs to keep the console
// to this server's own files (securityHeaders).
package adminhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/monolock/monolock/internal/acl"
	"github.com/monolock/monolock/internal/adminhttp/console"
	"github.com/monolock/monolock/internal/glob"
	"github.com/monolock/monolock/internal/hostcheck"
	"github.com/monolock/monolock/protocol"
	"github.com/monolock/monolock/protocol/admin"
)

// Backend is the running server, as the admin API needs it.
// It is declared here, by its user; cmd/monolock plugs the loop's
// *eventloop.Server in, whose methods take and return the shapes of
// protocol/admin.
type Backend interface {
	// Locks returns the page q selects of the held locks, sorted by name,
	// each with its full FIFO queue. q.Match must be called on the caller's
	// goroutine, never on the server's event loop, where a costly pattern
	// over many names would delay every client.
	Locks(ctx context.Context, q admin.LockQuery) (admin.LockList, error)
	// Lock returns one lock; ok is false when it is idle.
	Lock(ctx context.Context, name string) (admin.LockInfo, bool, error)
	// ForceRelease takes the lock from its holder; ok is false when idle.
	// operator is the caller's identity, for the audit log.
	ForceRelease(ctx context.Context, name, operator string) (token uint64, ok bool, err error)
	// KickWaiter removes one waiter; ok is false when there is no such
	// waiter. operator is the caller's identity, for the audit log.
	KickWaiter(ctx context.Context, name, remoteAddr, operator string) (ok bool, err error)
	// Stats is a snapshot of the server's counts.
	Stats(ctx context.Context) (admin.Stats, error)
}

// Info is the API's configuration: the static part of GET /api/info (the
// version and the server's effective configuration), and who may call what.
type Info struct {
	Version   string
	Started   time.Time // zero: when New was called
	Listen    string    // protocol listen address
	OpsListen string    // empty when off
	AuditLog  string    // a path, "-" for stdout, empty when off
	ACLFile   string    // empty when off
	TLS       bool
	MTLS      bool
	IOTimeout time.Duration
	// Ready says why the server should get no new clients, as /readyz
	// does, or nil; a nil Ready counts as ready.
	Ready func(ctx context.Context) error
	// HA, if set, is the node's place in its cluster (failover through
	// etcd); nil for a single server.
	HA func() *admin.HAInfo

	// Access decides each caller's identity and roles; nil is OpenAccess.
	Access *Access
	// Hosts is the Host rule of a port without mutual TLS (see package
	// hostcheck): every route answers only the Host headers it allows, and
	// 421 to the others. nil answers every Host, as a port whose callers
	// present client certificates may: a rebinding page cannot.
	Hosts *hostcheck.Rule
	// Refusals counts the calls refused for want of a role; nil counts none.
	Refusals Refusals
	// Log receives one warning per refused call, sampled; the zero Logger
	// writes nothing.
	Log zerolog.Logger
}

// MatchBudget bounds the work of one ?match= filter: the sum, over the
// names it is tried on, of the pattern's glob Cost, each step a byte
// comparison of about a nanosecond, so a filter takes at most a few tens of
// milliseconds of one core. An ordinary filter ("nightly/*", "*import*")
// costs a few hundred steps per name and stays far below it for every lock
// a server can hold; only '?' between two '*' multiplies the cost by the
// name's length.
const MatchBudget = 64 << 20

// CallTimeout bounds each backend call beyond the request's own context, so
// a wedged or stopping server answers 503 instead of hanging the client.
const CallTimeout = 10 * time.Second

// New returns the admin API over b.
func New(b Backend, info Info) http.Handler {
	if info.Started.IsZero() {
		info.Started = time.Now()
	}
	if info.Access == nil {
		info.Access = OpenAccess()
	}
	h := &handler{b: b, info: info, mux: http.NewServeMux(),
		fullListings: newListingTurns(maxListings(), fullListingsWaiting), pages: newListingTurns(maxListings(), 0),
		refusalLog: newRefusalLog(info.Log), console: console.New(), crossOrigin: http.NewCrossOriginProtection()}
	// A GET pattern also answers HEAD. The mux matches wildcards against the
	// escaped path and decodes each segment on its own, so "%2F" stays in
	// {name} and "%2E%2E" is the name "..", not a step up.
	h.route("GET /api/whoami", 0, h.whoami)
	h.route("GET /api/info", acl.RoleRead, h.getInfo)
	h.route("GET /api/locks", acl.RoleRead, h.listLocks)
	h.route("GET /api/locks/{name}", acl.RoleRead, h.getLock)
	h.route("POST /api/locks/{name}/release", acl.RoleRelease, h.sameOrigin(h.release))
	h.route("DELETE /api/locks/{name}/waiters/{addr}", acl.RoleKick, h.sameOrigin(h.kick))
	h.route("GET /{$}", 0, h.console.Page)
	h.route("GET /console/{file}", 0, h.asset)
	return h
}

// securityHeaders are sent with every answer, the console's and the API's:
// nothing but this server's own files may run, style or be fetched; no page
// may frame it; no referrer leaves it.
var securityHeaders = [][2]string{
	{"Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"},
	{"X-Content-Type-Options", "nosniff"},
	{"X-Frame-Options", "DENY"},
	{"Referrer-Policy", "no-referrer"},
	{"Cross-Origin-Opener-Policy", "same-origin"},
	{"Cross-Origin-Resource-Policy", "same-origin"},
}

// sameOrigin answers 403 to a change a browser sends from another site
// before serve runs. The API takes no cookie, but a page elsewhere can still
// make the browser of an operator who reaches the admin port (on loopback,
// through a tunnel, with a client certificate) POST to it, and a bodiless
// POST needs no CORS preflight. Browsers say where a request comes from
// (Sec-Fetch-Site, else Origin); curl and monolockctl send neither and pass.
func (h *handler) sameOrigin(serve http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h.crossOrigin.Check(r); err != nil {
			writeError(w, http.StatusForbidden, fmt.Sprintf("%s %s refused: %v; a browser may change locks only from the console this server serves at /, not from another site's page", r.Method, clip(r.URL.EscapedPath()), err))
			return
		}
		serve(w, r)
	}
}

func (h *handler) asset(w http.ResponseWriter, r *http.Request) {
	if !h.console.Asset(w, r, r.PathValue("file")) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no such console file %s: the console is served at /", clip(r.URL.EscapedPath())))
	}
}

type handler struct {
	b    Backend
	info Info
	mux  *http.ServeMux
	// fullListings and pages bound the lock listings (listings.go).
	fullListings, pages *listingTurns
	refusalLog          zerolog.Logger // refused calls, sampled
	console             *console.Files

	crossOrigin *http.CrossOriginProtection // see sameOrigin
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	for _, kv := range securityHeaders {
		w.Header().Set(kv[0], kv[1])
	}
	if h.info.Hosts != nil && !h.info.Hosts.Allows(r.Host) {
		writeError(w, http.StatusMisdirectedRequest, h.info.Hosts.Refusal(r.Host))
		return
	}
	h.mux.ServeHTTP(&muxWriter{ResponseWriter: w, r: r}, r)
}

// route registers one endpoint, served to callers that have role (0: to
// every caller). Its handler writes to the real ResponseWriter; only answers
// the mux makes itself go through muxWriter.
func (h *handler) route(pattern string, role acl.Role, serve http.HandlerFunc) {
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		w = w.(*muxWriter).ResponseWriter
		if identity, has := h.info.Access.Caller(r); !has.Has(role) {
			h.refuse(w, r, identity, has, role)
			return
		}
		serve(w, r)
	})
}

// operator is the caller's identity, which the audit log records for a
// force-release or a kick.
func (h *handler) operator(r *http.Request) string {
	identity, _ := h.info.Access.Caller(r)
	return identity
}

func (h *handler) whoami(w http.ResponseWriter, r *http.Request) {
	identity, roles := h.info.Access.Caller(r)
	writeJSON(w, http.StatusOK, admin.WhoAmI{Identity: identity, Roles: roles.Names()})
}

// muxWriter turns the ServeMux's own answers, plain-text 404 and 405 and
// the redirects it makes to clean a path, into the API's JSON errors.
type muxWriter struct {
	http.ResponseWriter
	r       *http.Request
	written bool // the mux's answer was replaced; drop its body
}

func (m *muxWriter) WriteHeader(status int) {
	if m.written {
		return
	}
	m.written = true
	path := clip(m.r.URL.EscapedPath())
	switch {
	case status == http.StatusNotFound:
		msg := fmt.Sprintf("no such endpoint %s: the admin port serves the console at / and the API at /api/whoami, /api/info, /api/locks, /api/locks/{name}, /api/locks/{name}/release and /api/locks/{name}/waiters/{remote_addr}", path)
		if strings.HasPrefix(m.r.URL.EscapedPath(), "/api/locks/") {
			msg += "; a lock name containing '/' must be percent-encoded as one segment (nightly%2Fimport for nightly/import)"
		}
		writeError(m.ResponseWriter, status, msg)
	case status == http.StatusMethodNotAllowed:
		// The mux has set Allow; keep it.
		allow := m.Header().Get("Allow")
		writeError(m.ResponseWriter, status, fmt.Sprintf("method %s is not allowed on %s: use %s", m.r.Method, path, strings.ReplaceAll(allow, ", ", " or ")))
	case status >= 300 && status < 400:
		// The mux redirects a path with an empty, "." or ".." segment to
		// its cleaned form. Following that would act on another lock than
		// the one named (a POST keeps its method through a 307), so the
		// API refuses instead.
		m.Header().Del("Location")
		writeError(m.ResponseWriter, http.StatusNotFound, fmt.Sprintf("no such endpoint %s: the admin API does not resolve empty, '.' or '..' path segments; percent-encode a lock named . or .. as %%2E or %%2E%%2E, and '/' in a name as %%2F", path))
	default:
		// The mux answers nothing else today; whatever it is, it is not a
		// success of the API's.
		if status < 400 {
			status = http.StatusInternalServerError
		}
		writeError(m.ResponseWriter, status, fmt.Sprintf("%s %s: %s", m.r.Method, path, http.StatusText(status)))
	}
}

func (m *muxWriter) Write(b []byte) (int, error) {
	if !m.written {
		m.WriteHeader(http.StatusOK)
	}
	return len(b), nil
}

// maxEcho bounds how much of a path, name or address an error message
// repeats: enough to recognise it, never the whole of a 900 KB request line.
const maxEcho = 64

// clip shortens s to maxEcho bytes, at a character boundary, marking the
// cut with "…".
func clip(s string) string {
	if cut := protocol.CutUTF8(s, maxEcho); cut != s {
		return cut + "…"
	}
	return s
}

// quote is %q of a clipped s, with the "…" outside the quotes so that it
// cannot be taken for part of the name.
func quote(s string) string {
	if c := clip(s); c != s {
		return strconv.Quote(strings.TrimSuffix(c, "…")) + "…"
	}
	return strconv.Quote(s)
}

// lockName reads and checks {name}. Names that can never be lock names get a
// 400 saying why.
func lockName(w http.ResponseWriter, r *http.Request) (string, bool) {
	name := r.PathValue("name")
	if err := protocol.ValidateName(name); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("%s cannot be a lock name (%v): lock names are 1 to %d bytes of UTF-8, percent-encoded as one path segment", quote(name), err, protocol.MaxNameLen))
		return "", false
	}
	return name, true
}

func (h *handler) getInfo(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := callContext(r)
	defer cancel()
	st, err := h.b.Stats(ctx)
	if err != nil {
		backendError(w, err)
		return
	}
	notReady := ""
	if h.info.Ready != nil {
		if err := h.info.Ready(ctx); err != nil {
			notReady = err.Error()
		}
	}
	var ha *admin.HAInfo
	if h.info.HA != nil {
		ha = h.info.HA()
	}
	writeJSON(w, http.StatusOK, admin.ServerInfo{
		HA:       ha,
		Version:  h.info.Version,
		UptimeMS: time.Since(h.info.Started).Milliseconds(),
		Config: admin.ServerConfig{
			Listen:      h.info.Listen,
			OpsListen:   h.info.OpsListen,
			TLS:         h.info.TLS,
			MTLS:        h.info.MTLS,
			ACLFile:     h.info.ACLFile,
			AuditLog:    h.info.AuditLog,
			IOTimeoutMS: h.info.IOTimeout.Milliseconds(),
		},
		Locks:       st.Locks,
		Sessions:    st.Sessions,
		Waiters:     st.Waiters,
		Grants:      st.Grants,
		Expiries:    st.Expiries,
		NewestToken: st.NewestToken,
		Ready:       notReady == "",
		NotReady:    notReady,
	})
}

func (h *handler) listLocks(w http.ResponseWriter, r *http.Request) {
	// URL.Query drops the pairs it cannot decode, which would turn a
	// mistyped filter into a list of every lock.
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("malformed query string (%v): percent-encode the match pattern (curl -G --data-urlencode 'match=nightly/*')", err))
		return
	}
	page, ok := pageQuery(w, q)
	if !ok {
		return
	}
	var (
		names      int
		cost       int
		overBudget bool
	)
	if ms := q["match"]; len(ms) > 1 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("match is given %d times: give one pattern, or make one request per pattern", len(ms)))
		return
	} else if len(ms) == 1 {
		p, err := glob.Compile(ms[0])
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("bad match pattern: %v (or leave out match= to list every lock)", err))
			return
		}
		// Each name is charged the pattern's worst case before it is
		// tried; once the budget is spent, no more are tried.
		page.Match = func(name string) bool {
			names++
			cost += p.Cost(len(name))
			overBudget = overBudget || cost > MatchBudget
			return !overBudget && p.Match(name)
		}
	}
	ctx, cancel := callContext(r)
	defer cancel()
	turns, kind, instead := h.fullListings, "full lock listings", fmt.Sprintf("ask for a page (limit=%d)", admin.MaxPageSize)
	if page.Limit > 0 {
		turns, kind, instead = h.pages, "pages of the lock list", "ask for a smaller page"
	}
	done, err := turns.take(ctx)
	if errors.Is(err, errListingsBusy) {
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("%d %s are in progress, the most served at once, and %d more wait for their turn, the most that may wait: retry shortly, %s, or name the lock (GET /api/locks/{name})", cap(turns.running), kind, cap(turns.waiting), instead))
		return
	}
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("%d %s are in progress, the most served at once, and this one found no turn within %v (%v): retry shortly, %s, or name the lock (GET /api/locks/{name})", cap(turns.running), kind, CallTimeout, err, instead))
		return
	}
	// The turn ends once the answer is encoded; writing it is at the
	// client's pace (listings.go).
	status, body := func() (int, []byte) {
		defer done()
		got, err := h.b.Locks(ctx, page)
		if err != nil {
			return encodeError(backendFailure(err))
		}
		if overBudget {
			return encodeError(http.StatusBadRequest, fmt.Sprintf("match pattern %s is too costly over %d held locks: it may take %d steps, and a request may take %d; each '?' between two '*' costs a pass over every name: use fewer of them, or start the pattern with a literal prefix (nightly/*)", quote(q.Get("match")), names, cost, MatchBudget))
		}
		if got.Locks == nil {
			got.Locks = []admin.LockInfo{} // "locks": [], so that .locks[] and len() work
		}
		return encodeJSON(http.StatusOK, got)
	}()
	writeBody(w, status, body)
}

// pageQuery reads limit= and after=: at most admin.MaxPageSize locks a
// page, every lock without limit=, the names after after= (exclusive).
func pageQuery(w http.ResponseWriter, q url.Values) (admin.LockQuery, bool) {
	var page admin.LockQuery
	for _, key := range []string{"limit", "after"} {
		if vs := q[key]; len(vs) > 1 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("%s is given %d times: give it once", key, len(vs)))
			return page, false
		}
	}
	if v, ok := q["limit"]; ok {
		n, err := strconv.Atoi(v[0])
		if err != nil || n < 1 || n > admin.MaxPageSize {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("limit=%s is not a page size: give a whole number from 1 to %d, or leave out limit= to list every lock", quote(v[0]), admin.MaxPageSize))
			return page, false
		}
		page.Limit = n
	}
	page.After = q.Get("after")
	return page, true
}

func (h *handler) getLock(w http.ResponseWriter, r *http.Request) {
	onLock(w, r, h.b.Lock, func(_ string, info admin.LockInfo) any { return info })
}

func (h *handler) release(w http.ResponseWriter, r *http.Request) {
	operator := h.operator(r)
	forceRelease := func(ctx context.Context, name string) (uint64, bool, error) {
		return h.b.ForceRelease(ctx, name, operator)
	}
	onLock(w, r, forceRelease, func(name string, token uint64) any {
		return admin.ReleaseResponse{Lock: name, ReleasedToken: token}
	})
}

// onLock answers a request about the lock named in the path: it runs call
// within CallTimeout and writes answer's body, or 404 when the lock is idle.
func onLock[T any](w http.ResponseWriter, r *http.Request, call func(context.Context, string) (T, bool, error), answer func(name string, v T) any) {
	name, ok := lockName(w, r)
	if !ok {
		return
	}
	ctx, cancel := callContext(r)
	defer cancel()
	v, ok, err := call(ctx, name)
	if err != nil {
		backendError(w, err)
		return
	}
	if !ok {
		idle(w, name)
		return
	}
	writeJSON(w, http.StatusOK, answer(name, v))
}

func (h *handler) kick(w http.ResponseWriter, r *http.Request) {
	name, ok := lockName(w, r)
	if !ok {
		return
	}
	addr := r.PathValue("addr")
	ctx, cancel := callContext(r)
	defer cancel()
	ok, err := h.b.KickWaiter(ctx, name, addr, h.operator(r))
	if err != nil {
		backendError(w, err)
		return
	}
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("lock %q has no waiter at %s: list the queue with GET /api/locks/%s and use a remote_addr from it", name, clip(addr), url.PathEscape(name)))
		return
	}
	writeJSON(w, http.StatusOK, admin.KickResponse{Lock: name, Kicked: addr})
}

func idle(w http.ResponseWriter, name string) {
	writeError(w, http.StatusNotFound, fmt.Sprintf("lock %q is idle (no holder, no waiters): check the name and its percent-encoding, or list held locks with GET /api/locks", name))
}

func callContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), CallTimeout)
}

// backendError reports a failed call to the server's loop: it timed out, the
// client went away, or the server is stopping.
func backendError(w http.ResponseWriter, err error) {
	status, msg := backendFailure(err)
	writeError(w, status, msg)
}

// backendFailure is the status and message of a failed call to the
// server's loop.
func backendFailure(err error) (int, string) {
	msg := fmt.Sprintf("the lock server did not answer: %v; it may be shutting down or overloaded, retry shortly", err)
	if errors.Is(err, context.DeadlineExceeded) {
		msg = fmt.Sprintf("the lock server did not answer within %v; it may be shutting down or overloaded, retry shortly", CallTimeout)
	}
	return http.StatusServiceUnavailable, msg
}

func writeError(w http.ResponseWriter, status int, msg string) {
	status, body := encodeError(status, msg)
	writeBody(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	status, body := encodeJSON(status, v)
	writeBody(w, status, body)
}

func encodeError(status int, msg string) (int, []byte) {
	return encodeJSON(status, admin.ErrorResponse{Error: msg})
}

// encodeJSON is v's JSON body, or a 500 saying why it could not be
// encoded.
func encodeJSON(status int, v any) (int, []byte) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		b.Reset()
		msg, _ := json.Marshal("cannot encode the response: " + err.Error())
		fmt.Fprintf(&b, "{\"error\":%s}\n", msg)
	}
	return status, b.Bytes()
}

// writeBody sends an encoded JSON body.
func writeBody(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
