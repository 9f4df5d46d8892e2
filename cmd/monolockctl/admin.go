package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"

	"github.com/monolock/monolock/protocol/admin"
)

// defaultAdminAddress is where the admin commands look for the admin API
// without -admin or MONOLOCK_ADMIN_ADDRESS.
const defaultAdminAddress = "127.0.0.1:7071"

// adminTimeout bounds one admin request. The API bounds its own call into the
// server at 10 s and answers 503 after that.
const adminTimeout = 15 * time.Second

// maxAdminBody bounds an answer of the admin API.
const maxAdminBody = 256 << 20

// adminExitStatus is the exit status part of every admin command's help.
const adminExitStatus = `Exit status:
  0   done
  1   the admin API answered with an error, which is printed
  2   usage error: bad flags or arguments, invalid NAME, bad -admin address
  3   no such lock (it is idle: no holder, no waiters) or no such waiter
      (lock, release and kick only)
  69  admin API unreachable (connect timeout %v, request timeout %v), or the
      lock server behind it did not answer (HTTP 503)
`

// adminFlags are the flags of every admin command: the connection flags,
// -admin and -json.
type adminFlags struct {
	conn  *connFlags
	admin string
	json  bool
}

func addAdminFlags(fs *flag.FlagSet, getenv func(string) string) *adminFlags {
	a := &adminFlags{conn: addConnFlags(fs, getenv)}
	fs.StringVar(&a.admin, "admin", envOr(getenv, "MONOLOCK_ADMIN_ADDRESS", defaultAdminAddress),
		"admin API address: `host:port` or a URL such as http://127.0.0.1:7071 (env MONOLOCK_ADMIN_ADDRESS)")
	fs.BoolVar(&a.json, "json", false, "print the admin API's JSON answer (indented) instead of a table")
	return a
}

// adminClient talks to the admin API.
type adminClient struct {
	base string // scheme://host:port[/prefix], without a trailing slash
	http *http.Client
}

// client builds the admin API client the flags describe. Its errors are
// usage errors.
func (a *adminFlags) client() (*adminClient, error) {
	u, err := parseAdminAddress(a.admin)
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: connectTimeout}).DialContext,
		TLSHandshakeTimeout:   connectTimeout,
		ResponseHeaderTimeout: adminTimeout,
		// No proxy: the admin API belongs on loopback.
	}
	if u.Scheme == "https" {
		cfg, err := a.conn.tlsConfig()
		if err != nil {
			return nil, err
		}
		tr.TLSClientConfig = cfg
	}
	return &adminClient{
		base: strings.TrimSuffix(u.String(), "/"),
		http: &http.Client{Transport: tr, Timeout: adminTimeout},
	}, nil
}

// parseAdminAddress accepts host:port or an http:// or https:// URL.
func parseAdminAddress(s string) (*url.URL, error) {
	const want = "want host:port or a URL such as http://127.0.0.1:7071"
	if s == "" {
		return nil, fmt.Errorf("-admin is empty: %s", want)
	}
	if !strings.Contains(s, "://") {
		host, port, err := net.SplitHostPort(s)
		if err != nil || port == "" {
			return nil, fmt.Errorf("-admin %q: %s", s, want)
		}
		return &url.URL{Scheme: "http", Host: net.JoinHostPort(host, port)}, nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("-admin %q: %v; %s", s, err, want)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("-admin %q: scheme %q is not http or https", s, u.Scheme)
	case u.Host == "":
		return nil, fmt.Errorf("-admin %q: no host; %s", s, want)
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return nil, fmt.Errorf("-admin %q: no user, query or fragment, please; %s", s, want)
	}
	return u, nil
}

// unreachableError is a request that got no HTTP answer.
type unreachableError struct {
	base string
	err  error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("admin API at %s unreachable: %v (is the server running with -admin-listen, and is -admin or MONOLOCK_ADMIN_ADDRESS its address?)", e.base, e.err)
}

// apiError is an error answer: a JSON {"error": ...} from the admin API, or
// (notAPI) an answer that does not come from it.
type apiError struct {
	status int
	msg    string
	notAPI bool
}

func (e *apiError) Error() string { return e.msg }

// call makes one request and returns the JSON body of a 2xx answer. Other
// answers are *apiError, no answer is *unreachableError.
func (c *adminClient) call(method, path string, query url.Values) ([]byte, error) {
	target := c.base + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	req, err := http.NewRequest(method, target, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, &unreachableError{base: c.base, err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAdminBody))
	if err != nil {
		return nil, &unreachableError{base: c.base, err: fmt.Errorf("reading the answer: %w", err)}
	}
	isJSON := json.Valid(body)
	if resp.StatusCode/100 == 2 {
		if !isJSON {
			return nil, &apiError{status: resp.StatusCode, notAPI: true, msg: fmt.Sprintf("%s %s answered %s without JSON: is -admin the admin API's address?", method, target, resp.Status)}
		}
		return body, nil
	}
	var e admin.ErrorResponse
	if isJSON && json.Unmarshal(body, &e) == nil && e.Error != "" {
		return nil, &apiError{status: resp.StatusCode, msg: e.Error}
	}
	excerpt := strings.TrimSpace(string(body))
	if len(excerpt) > 200 {
		excerpt = excerpt[:200] + "..."
	}
	return nil, &apiError{status: resp.StatusCode, notAPI: true, msg: fmt.Sprintf("%s %s answered %s (%q), not an admin API error: is -admin the admin API's address?", method, target, resp.Status, excerpt)}
}

// failed prints err as "monolockctl: <message>" and returns the exit status:
// exitUnavailable for no answer or the API's 503, notFound for the API's 404
// (the command decides what a 404 means), exitFailed otherwise.
func failed(e *env, err error, notFound int) int {
	fmt.Fprintf(e.stderr, "monolockctl: %v\n", err)
	var unreachable *unreachableError
	var api *apiError
	switch {
	case errors.As(err, &unreachable):
		return exitUnavailable
	case !errors.As(err, &api) || api.notAPI:
		return exitFailed
	case api.status == http.StatusServiceUnavailable:
		return exitUnavailable
	case api.status == http.StatusNotFound:
		return notFound
	}
	return exitFailed
}

// printJSON writes an answer indented.
func printJSON(e *env, body []byte) int {
	var out bytes.Buffer
	if err := json.Indent(&out, bytes.TrimSpace(body), "", "  "); err != nil {
		return failed(e, err, exitFailed)
	}
	out.WriteByte('\n')
	_, _ = e.stdout.Write(out.Bytes())
	return 0
}

// fetch makes an admin command's one request. With -json it prints the
// answer as it is; otherwise it decodes the answer into v for the command's
// table (tokens are uint64 fields, which encoding/json decodes exactly).
// done reports that the command is over, with status its exit status: the
// request failed, the answer was printed, or it did not decode. When the API
// answers 404 and missing is set, missing is printed in place of the API's
// message (which names HTTP paths, not commands) and the status is
// exitNoSuch; without missing a 404 is a failure like any other.
func fetch(e *env, a *adminFlags, c *adminClient, method, path string, query url.Values, missing string, v any) (status int, done bool) {
	body, err := c.call(method, path, query)
	var api *apiError
	if missing != "" && errors.As(err, &api) && api.status == http.StatusNotFound && !api.notAPI {
		fmt.Fprintf(e.stderr, "monolockctl: %s\n", missing)
		return exitNoSuch, true
	}
	if err != nil {
		return failed(e, err, exitFailed), true
	}
	if a.json {
		return printJSON(e, body), true
	}
	if err := json.Unmarshal(body, v); err != nil {
		return failed(e, fmt.Errorf("unexpected answer from the admin API: %v", err), exitFailed), true
	}
	return 0, false
}

// lockPath is the API path of a lock: the name is one percent-encoded path
// segment, so that a '/' in it stays part of it.
func lockPath(name string) string {
	return "/api/locks/" + pathSegment(name)
}

// pathSegment escapes s as one path segment. "." and ".." are escaped too, so
// that nothing on the way treats them as path steps.
func pathSegment(s string) string {
	esc := url.PathEscape(s)
	if esc == "." || esc == ".." {
		esc = strings.ReplaceAll(esc, ".", "%2E")
	}
	return esc
}

// timeFormat is how tables print times: UTC, milliseconds.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(timeFormat)
}

func fmtMS(ms int64) string { return (time.Duration(ms) * time.Millisecond).String() }

// cell makes a string safe for a table cell: empty is "-", and a string with
// tabs, newlines or other unprintable characters is quoted.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return fmt.Sprintf("%q", s)
	}
	return s
}

// holderCell is the holder's address, with its identity under mutual TLS.
func holderCell(addr, identity string) string {
	if identity == "" {
		return cell(addr)
	}
	return cell(addr) + " (" + cell(identity) + ")"
}

func orOff(s string) string {
	if s == "" {
		return "off"
	}
	return cell(s)
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
