// Package hostcheck keeps DNS rebinding away from monolock's HTTP ports that
// have no client authentication: the ops port and an admin port without
// mutual TLS.
//
// A page on attacker.example can make its own name resolve to 127.0.0.1 (or
// to any address the victim's browser reaches); to the browser its fetches
// to that name are then same-origin, so no cross-site check stops them, and
// they land on the admin API with "Host: attacker.example:7071". What gives
// them away is that Host: rebinding needs a name the attacker controls.
// So a port answers only a Host that is
//
//   - an IP literal (v4, or v6 in brackets), with or without a port: a
//     browser that reached the port by its address, as Prometheus scraping
//     a pod's IP and the console at its bound address do;
//   - localhost (any case, with or without a trailing dot): no outside DNS
//     answers for it;
//   - a name the operator lists (a tunnel's, a Kubernetes service's, an
//     ingress's), compared without case and trailing dot.
//
// Anything else gets 421 Misdirected Request, whose message names the
// setting that lists names. A request without Host (HTTP/1.0) is answered:
// every browser sends the Host it resolved, so such a request is no
// rebinding.
package hostcheck

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
)

// Rule is the Host rule of one port. It is immutable and safe for
// concurrent use.
type Rule struct {
	names   map[string]bool // the listed names, canonical (see canonical)
	setting string          // how the operator lists names, for the refusal
}

// New returns the rule that answers IP literals, localhost and names, each
// already checked by ParseNames. setting says how an operator lists a name
// ("-http-allowed-hosts or MONOLOCK_HTTP_ALLOWED_HOSTS"); the refusal
// repeats it.
func New(names []string, setting string) *Rule {
	r := &Rule{names: make(map[string]bool, len(names)), setting: setting}
	for _, n := range names {
		r.names[canonical(n)] = true
	}
	return r
}

// ParseNames reads a comma-separated list of host names, as an operator
// writes it: spaces around names are ignored, an empty list is no name.
// Each must be a bare name: no scheme, no port, no path, no wildcard.
func ParseNames(list string) ([]string, error) {
	var names []string
	for _, f := range strings.Split(list, ",") {
		n := strings.TrimSpace(f)
		if n == "" {
			continue
		}
		if err := checkName(n); err != nil {
			return nil, fmt.Errorf("%q %w", n, err)
		}
		names = append(names, canonical(n))
	}
	return names, nil
}

var errNotAName = errors.New("is not a host name")

func checkName(n string) error {
	switch {
	case strings.Contains(n, "://"):
		return fmt.Errorf("%w: give the name alone, without a scheme (monolock.example.com, not https://monolock.example.com)", errNotAName)
	case strings.ContainsAny(n, "/:[]"):
		return fmt.Errorf("%w: give the name alone, without a port or a path (monolock.example.com, not monolock.example.com:7071); any port of that name is answered", errNotAName)
	case strings.ContainsAny(n, "*?"):
		return fmt.Errorf("%w: wildcards are not supported; list each name", errNotAName)
	case len(n) > 253:
		return fmt.Errorf("%w: it is %d bytes, and a DNS name is at most 253", errNotAName, len(n))
	}
	for _, c := range []byte(n) {
		if c <= ' ' || c >= 0x7f || c == '"' || c == '\\' || c == ',' {
			return fmt.Errorf("%w: it contains %s; a name is letters, digits, '-', '_' and '.' (an internationalised name in its xn-- form)", errNotAName, strconv.QuoteRune(rune(c)))
		}
	}
	return nil
}

// canonical is a name in lower case without its trailing dot.
func canonical(name string) string {
	return strings.ToLower(strings.TrimSuffix(name, "."))
}

// Allows reports whether the port answers a request with this Host header
// (http.Request.Host: a name or address, perhaps with a port).
func (r *Rule) Allows(host string) bool {
	if host == "" {
		return true // HTTP/1.0 without Host: no browser, no rebinding
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		name = host[1 : len(host)-1]
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return true
	}
	name = canonical(name)
	return name == "localhost" || r.names[name]
}

// Refusal is the message of a 421: what was refused, why, and what to do.
func (r *Rule) Refusal(host string) string {
	port := ":PORT"
	if _, p, err := net.SplitHostPort(host); err == nil && p != "" {
		port = ":" + p
	}
	if cut := 64; len(host) > cut {
		host = host[:cut] + "…"
	}
	return fmt.Sprintf("Host %q is not an address of this port, localhost, or a name listed for it: "+
		"a web page whose name resolves to this server must not reach it (DNS rebinding). "+
		"Use the port's IP address or localhost (127.0.0.1%s, localhost%s), "+
		"or list the name you use (a tunnel's, a service's, an ingress's) with %s", host, port, port, r.setting)
}

// Guard serves next only to requests whose Host r allows; the others get
// refuse(w, 421, r.Refusal(host)). A nil rule guards nothing.
func (r *Rule) Guard(next http.Handler, refuse func(w http.ResponseWriter, status int, msg string)) http.Handler {
	if r == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !r.Allows(req.Host) {
			refuse(w, http.StatusMisdirectedRequest, r.Refusal(req.Host))
			return
		}
		next.ServeHTTP(w, req)
	})
}

// PlainText writes msg as a plain-text answer, for ports whose answers are
// not JSON.
func PlainText(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = fmt.Fprintln(w, msg)
}
