package main

import (
	"context"
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

	"github.com/monolock/monolock/protocol/admin"
)

// The admin API's client: the flags that find it, one bounded request, and
// what its failures mean.

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
  2   usage error: bad flags or arguments, invalid NAME, bad -admin address,
      or TLS settings that do not fit the admin port (HTTPS against plain
      HTTP or the reverse, a client certificate missing or refused, a server
      certificate not trusted)
  3   no such lock (it is idle: no holder, no waiters) or no such waiter
      (lock, release and kick only)
  69  admin API unreachable (connect timeout %v, request timeout %v), or the
      lock server behind it did not answer (HTTP 503)
`

// adminFlags are the flags of every admin command: the connection flags,
// -admin, the admin port's TLS files and -json.
type adminFlags struct {
	conn                   *connFlags
	admin                  string
	tlsCA, tlsCert, tlsKey string
	json                   bool
}

func addAdminFlags(fs *flag.FlagSet, getenv func(string) string) *adminFlags {
	a := &adminFlags{conn: addConnFlags(fs, getenv)}
	fs.StringVar(&a.admin, "admin", envOr(getenv, "MONOLOCK_ADMIN_ADDRESS", defaultAdminAddress),
		"admin API address: `host:port` or a URL such as http://127.0.0.1:7071 (env MONOLOCK_ADMIN_ADDRESS)")
	fs.StringVar(&a.tlsCA, "admin-tls-ca", getenv("MONOLOCK_ADMIN_TLS_CA"),
		"PEM `file` with the CAs that sign the admin port's certificate; any -admin-tls-* flag makes a host:port -admin HTTPS (env MONOLOCK_ADMIN_TLS_CA)")
	fs.StringVar(&a.tlsCert, "admin-tls-cert", getenv("MONOLOCK_ADMIN_TLS_CERT"),
		"PEM operator certificate `file` for an admin port with mutual TLS, with -admin-tls-key (env MONOLOCK_ADMIN_TLS_CERT)")
	fs.StringVar(&a.tlsKey, "admin-tls-key", getenv("MONOLOCK_ADMIN_TLS_KEY"),
		"PEM private key `file` of -admin-tls-cert (env MONOLOCK_ADMIN_TLS_KEY)")
	fs.BoolVar(&a.json, "json", false, "print the admin API's JSON answer (indented) instead of a table")
	return a
}

// adminTLS reports whether any -admin-tls-* flag is set.
func (a *adminFlags) adminTLS() bool { return a.tlsCA != "" || a.tlsCert != "" || a.tlsKey != "" }

// adminClient talks to the admin API.
type adminClient struct {
	base string // scheme://host:port[/prefix], without a trailing slash
	http *http.Client
	cert bool // a client certificate is configured
}

// client builds the admin API client the flags describe. Its errors are
// usage errors.
func (a *adminFlags) client() (*adminClient, error) {
	u, err := parseAdminAddress(a.admin)
	if err != nil {
		return nil, err
	}
	if a.adminTLS() {
		if strings.HasPrefix(a.admin, "http://") {
			return nil, fmt.Errorf("-admin %s is plain HTTP, but -admin-tls-* flags are given: write https://%s, or drop the -admin-tls-* flags (and MONOLOCK_ADMIN_TLS_*)", a.admin, u.Host)
		}
		u.Scheme = "https"
	}
	tr := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: connectTimeout}).DialContext,
		TLSHandshakeTimeout:   connectTimeout,
		ResponseHeaderTimeout: adminTimeout,
		// No proxy: the admin API belongs on loopback.
	}
	if u.Scheme == "http" {
		tr.DialContext = dialHTTPAnswers(&net.Dialer{Timeout: connectTimeout})
	}
	if u.Scheme == "https" {
		// The admin port's own files; without them, an https:// URL (a
		// proxy in front of the API) keeps using the -tls-* flags.
		cfg, err := clientTLS("admin-tls", a.tlsCA, a.tlsCert, a.tlsKey)
		if cfg == nil && err == nil {
			cfg, err = a.conn.tlsConfig()
		}
		if err != nil {
			return nil, err
		}
		tr.TLSClientConfig = cfg
	}
	return &adminClient{
		base: strings.TrimSuffix(u.String(), "/"),
		http: &http.Client{Transport: tr, Timeout: adminTimeout},
		cert: tr.TLSClientConfig != nil && len(tr.TLSClientConfig.Certificates) > 0,
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

// errNotHTTP is a plain-HTTP peer that answered with bytes that cannot
// begin an HTTP/1.x answer, such as the lock port's error frame.
var errNotHTTP = errors.New("the answer does not begin with HTTP/")

// httpAnswerConn fails the read that shows the answer is not HTTP with
// errNotHTTP: net/http's transport reports a malformed answer with an error
// of no type of its own, and the caller's advice depends on telling it.
type httpAnswerConn struct {
	net.Conn
	checked int // leading bytes of the answer found to match "HTTP/"
}

const httpAnswerPrefix = "HTTP/"

func (c *httpAnswerConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	for i := 0; i < n && c.checked < len(httpAnswerPrefix); i++ {
		if p[i] != httpAnswerPrefix[c.checked] {
			return 0, errNotHTTP
		}
		c.checked++
	}
	return n, err
}

// dialHTTPAnswers dials with d and checks that the answers are HTTP.
func dialHTTPAnswers(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &httpAnswerConn{Conn: conn}, nil
	}
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
		if errors.Is(err, errNotHTTP) {
			return nil, &apiError{notAPI: true, msg: fmt.Sprintf("%s does not answer in HTTP: -admin (or MONOLOCK_ADMIN_ADDRESS) must be the server's -admin-listen address, not its lock port (%v)", c.base, err)}
		}
		if terr := tlsMismatch(c.base, c.cert, err); terr != nil {
			return nil, terr
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
	if resp.StatusCode == http.StatusBadRequest && strings.Contains(string(body), "HTTP request to an HTTPS server") {
		return nil, &tlsMismatchError{msg: fmt.Sprintf("the admin API at %s speaks HTTPS only: give -admin-tls-ca with the CA of its certificate (and -admin-tls-cert, -admin-tls-key with an operator certificate when it asks for one), or write -admin https://%s", c.base, req.URL.Host)}
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
