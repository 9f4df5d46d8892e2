package main

import (
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

// notHTTP reports whether err says that the peer answered, but not in
// HTTP (net/http's transport gives such errors no type of their own).
func notHTTP(err error) bool {
	return strings.Contains(err.Error(), "malformed HTTP")
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
		if notHTTP(err) {
			return nil, &apiError{notAPI: true, msg: fmt.Sprintf("%s does not answer in HTTP: -admin (or MONOLOCK_ADMIN_ADDRESS) must be the server's -admin-listen address, not its lock port (%v)", c.base, err)}
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
