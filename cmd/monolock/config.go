package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rs/zerolog"

	"github.com/monolock/monolock/eventloop"
	"github.com/monolock/monolock/internal/haetcd"
	"github.com/monolock/monolock/internal/hostcheck"
	"github.com/monolock/monolock/internal/opshttp"
)

// settings is the server's configuration as the operator gave it.
type settings struct {
	listen      string
	opsListen   string
	adminListen string
	auditLog    string
	tlsCert     string
	tlsKey      string
	tlsClientCA string
	tlsTickets  string
	aclFile     string
	// The admin port's TLS and roles (see admin.go).
	adminTLSCert              string
	adminTLSKey               string
	adminTLSClientCA          string
	adminACLFile              string
	adminAllowUnauthenticated bool
	handshakes                int
	ioTimeout                 time.Duration
	silence                   time.Duration // -waiter-silence-limit
	// shutdownDelay is how long the protocol port keeps serving after
	// SIGTERM while /readyz already answers 503.
	shutdownDelay time.Duration
	logLevel      zerolog.Level
	logFormat     string
	// httpAllowedHosts are the names, beyond IP literals and localhost,
	// that the ops port and an admin port without mutual TLS answer in
	// Host (package hostcheck).
	httpAllowedHosts []string

	// Failover through etcd (ha.go); haEtcd empty: a single server.
	haEtcd    []string
	haCluster string
	haTTL     time.Duration
	haName    string
	haCA      string
	haCert    string
	haKey     string

	// origins is each setting as the operator gave it, by flag name, for
	// error messages that must name it.
	origins map[string]origin
	// testClockOffsetFile is MONOLOCK_TEST_WALL_CLOCK_OFFSET_FILE: not a
	// setting, a test's knob (testclock.go).
	testClockOffsetFile string
	// httpLimits bound the ops and admin HTTP servers; the zero value means
	// opshttp.DefaultLimits. Not a flag: tests shorten the timeouts.
	httpLimits opshttp.Limits
}

// describe names a setting and its value as the operator gave it, for an
// error message: "-listen 127.0.0.1:7070" or
// "MONOLOCK_LISTEN_ADDRESS=127.0.0.1:7070".
func (s settings) describe(flag string) string {
	o := s.origins[flag]
	if o.env != "" {
		return o.env + "=" + o.value
	}
	return "-" + flag + " " + o.value
}

// envOf is the environment variable of a flag.
func envOf(flag string) string {
	for _, st := range table {
		if st.flag == flag {
			return st.env
		}
	}
	return ""
}

// origin is a setting's text and, if it came from there, its environment
// variable.
type origin struct{ value, env string }

// setting is one row of the configuration table: a flag, its environment
// variable, its default and its meaning. Flag beats environment beats default.
type setting struct {
	flag, env, def, usage string
	set                   func(*settings, string) error
}

// boolean reports whether the setting is a switch: its default is "false",
// and "-flag" alone means "-flag=true".
func (st setting) boolean() bool { return st.def == "false" }

var table = []setting{
	{"listen", "MONOLOCK_LISTEN_ADDRESS", eventloop.DefaultListenAddress, "protocol listen address (host:port)",
		func(s *settings, v string) error {
			// An empty address would bind every interface on the default
			// port: never what an empty value was meant to say.
			if strings.TrimSpace(v) == "" {
				return errors.New(`want host:port, such as 127.0.0.1:7070 (":7070" listens on every address), got an empty value`)
			}
			s.listen = v
			return nil
		}},
	{"ops-listen", "MONOLOCK_OPS_LISTEN_ADDRESS", "", "HTTP address for /metrics, /healthz, /readyz (empty: off)",
		func(s *settings, v string) error { s.opsListen = v; return nil }},
	{"admin-listen", "MONOLOCK_ADMIN_LISTEN_ADDRESS", "", "address of the admin API (empty: off); beyond loopback it needs mutual TLS (-admin-tls-client-ca) or -admin-allow-unauthenticated",
		func(s *settings, v string) error { s.adminListen = v; return nil }},
	{"admin-tls-cert", "MONOLOCK_ADMIN_TLS_CERT", "", "PEM server certificate of the admin port (may be -tls-cert's file); with -admin-tls-key the admin API speaks HTTPS only",
		func(s *settings, v string) error { s.adminTLSCert = v; return nil }},
	{"admin-tls-key", "MONOLOCK_ADMIN_TLS_KEY", "", "PEM private key of -admin-tls-cert",
		func(s *settings, v string) error { s.adminTLSKey = v; return nil }},
	{"admin-tls-client-ca", "MONOLOCK_ADMIN_TLS_CLIENT_CA", "", "PEM CA pool for operator certificates: mutual TLS on the admin port, every call needs a role from -admin-acl-file",
		func(s *settings, v string) error { s.adminTLSClientCA = v; return nil }},
	{"admin-acl-file", "MONOLOCK_ADMIN_ACL_FILE", "", "JSON admin ACL: identity patterns granting the roles read, release and kick; needs -admin-tls-client-ca",
		func(s *settings, v string) error { s.adminACLFile = v; return nil }},
	{"admin-allow-unauthenticated", "MONOLOCK_ADMIN_ALLOW_UNAUTHENTICATED", "false", "RISK: serve the admin API without mutual TLS on a non-loopback -admin-listen; anyone who reaches that address can force-release any lock, so two clients may believe they hold it, and kick any waiter",
		func(s *settings, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("want true or false, got %q", v)
			}
			s.adminAllowUnauthenticated = b
			return nil
		}},
	{"http-allowed-hosts", "MONOLOCK_HTTP_ALLOWED_HOSTS", "", "comma-separated host names that the ops port and an admin port without mutual TLS answer besides IP addresses and localhost (a tunnel's, a service's, an ingress's); any other Host gets 421, against DNS rebinding",
		func(s *settings, v string) (err error) { s.httpAllowedHosts, err = hostcheck.ParseNames(v); return err }},
	{"audit-log", "MONOLOCK_AUDIT_LOG", "", "audit stream of ownership changes: a file path, or - for stdout (empty: off)",
		func(s *settings, v string) error { s.auditLog = v; return nil }},
	{"tls-cert", "MONOLOCK_TLS_CERT", "", "PEM server certificate; with -tls-key the protocol port speaks TLS only",
		func(s *settings, v string) error { s.tlsCert = v; return nil }},
	{"tls-key", "MONOLOCK_TLS_KEY", "", "PEM private key of -tls-cert",
		func(s *settings, v string) error { s.tlsKey = v; return nil }},
	{"tls-client-ca", "MONOLOCK_TLS_CLIENT_CA", "", "PEM CA pool for client certificates: mutual TLS, identities",
		func(s *settings, v string) error { s.tlsClientCA = v; return nil }},
	{"tls-ticket-keys", "MONOLOCK_TLS_TICKET_KEYS", "", "session-ticket keys shared by a failover pair and kept across restarts: one a line, 32 random bytes in base64 (openssl rand -base64 32), the first issuing",
		func(s *settings, v string) error { s.tlsTickets = v; return nil }},
	{"acl-file", "MONOLOCK_ACL_FILE", "", "JSON access-control list of identity and lock patterns; needs -tls-client-ca",
		func(s *settings, v string) error { s.aclFile = v; return nil }},
	{"tls-handshakes", "MONOLOCK_TLS_HANDSHAKES", strconv.Itoa(eventloop.DefaultMaxTLSHandshakes), "TLS handshakes computing at once; a handshake waiting for its client holds no slot",
		func(s *settings, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return fmt.Errorf("want a positive whole number such as 64, got %q", v)
			}
			s.handshakes = n
			return nil
		}},
	{"io-timeout", "MONOLOCK_IO_TIMEOUT", eventloop.DefaultIOTimeout.String(), "bound on a missing ACQUIRE, a half-sent frame and undrained output (Go duration)",
		func(s *settings, v string) error { return positiveDuration(&s.ioTimeout, v, "5s") }},
	{"waiter-silence-limit", "MONOLOCK_WAITER_SILENCE_LIMIT", eventloop.DefaultWaiterSilenceLimit.String(), "at the descriptor limit, a waiter that has sent nothing for this long may be closed to accept a new connection; keep it above lease/4 of your longest waiting clients (Go duration)",
		func(s *settings, v string) error { return positiveDuration(&s.silence, v, "1m") }},
	{"shutdown-delay", "MONOLOCK_SHUTDOWN_DELAY", "0s", "on SIGTERM, /readyz answers 503 at once and the protocol port keeps serving this long before sessions get ERROR 0x01 (Go duration)",
		func(s *settings, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return fmt.Errorf("want a Go duration of 0 or more such as 5s, got %q", v)
			}
			s.shutdownDelay = d
			return nil
		}},
	{"ha-etcd", "MONOLOCK_HA_ETCD", "", "comma-separated etcd client URLs (http://192.0.2.10:2379,...): this server is one node of a cluster led through etcd, and serves the lock port only while it leads (empty: a single server)",
		func(s *settings, v string) (err error) { s.haEtcd, err = parseEndpoints(v); return err }},
	{"ha-cluster", "MONOLOCK_HA_CLUSTER", "", "the cluster's name (letters, digits, '.', '_', '-'); its keys live under /monolock/NAME/ in etcd; required with -ha-etcd",
		func(s *settings, v string) error {
			if v != "" && !clusterName.MatchString(v) {
				return fmt.Errorf("want a name of letters, digits, '.', '_' and '-', such as locks-prod, got %q", v)
			}
			s.haCluster = v
			return nil
		}},
	{"ha-ttl", "MONOLOCK_HA_TTL", haetcd.DefaultTTL.String(), "the etcd lease's TTL, whole seconds, at least 2s: a leader cut off from etcd stops serving 0.8 × TTL after its last keepalive was answered (Go duration)",
		func(s *settings, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d < haetcd.MinTTL || d%time.Second != 0 {
				return fmt.Errorf("want whole seconds of at least 2s (etcd's lease unit), such as 5s, got %q", v)
			}
			s.haTTL = d
			return nil
		}},
	{"ha-name", "MONOLOCK_HA_NAME", "", "this node's name in the election, shown by the others as the leader; put the address clients reach in it, such as \"node-a 192.0.2.1:7070\" (empty: the host name)",
		func(s *settings, v string) error { s.haName = v; return nil }},
	{"ha-etcd-ca", "MONOLOCK_HA_ETCD_CA", "", "PEM CA pool that verifies etcd's certificate (https endpoints)",
		func(s *settings, v string) error { s.haCA = v; return nil }},
	{"ha-etcd-cert", "MONOLOCK_HA_ETCD_CERT", "", "PEM client certificate for etcd (with -ha-etcd-key)",
		func(s *settings, v string) error { s.haCert = v; return nil }},
	{"ha-etcd-key", "MONOLOCK_HA_ETCD_KEY", "", "PEM private key of -ha-etcd-cert",
		func(s *settings, v string) error { s.haKey = v; return nil }},
	{"log-level", "MONOLOCK_LOG_LEVEL", "info", "diagnostics level: debug, info, warn, error",
		func(s *settings, v string) error {
			switch v {
			case "debug", "info", "warn", "error":
				s.logLevel, _ = zerolog.ParseLevel(v)
				return nil
			}
			return fmt.Errorf("want debug, info, warn or error, got %q", v)
		}},
	{"log-format", "MONOLOCK_LOG_FORMAT", "text", "diagnostics format on stderr: text or json",
		func(s *settings, v string) error {
			if v != "text" && v != "json" {
				return fmt.Errorf("want text or json, got %q", v)
			}
			s.logFormat = v
			return nil
		}},
}

// errUsage is returned after the help text was printed for -h.
var errUsage = errors.New("usage requested")

// parseSettings reads flags, then the environment, then defaults.
func parseSettings(args []string, getenv func(string) string, stderr io.Writer) (settings, error) {
	fs := flag.NewFlagSet("monolock", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	values := make([]*string, len(table))
	for i, st := range table {
		if st.boolean() {
			v := boolFlag("")
			fs.Var(&v, st.flag, st.usage)
			values[i] = (*string)(&v)
			continue
		}
		values[i] = fs.String(st.flag, "", st.usage)
	}
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stderr)
			return settings{}, errUsage
		}
		return settings{}, fmt.Errorf("%w (run monolock -h for the settings)", err)
	}
	if fs.NArg() > 0 {
		return settings{}, fmt.Errorf("unexpected argument %q: monolock takes only flags (run monolock -h)", fs.Arg(0))
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })

	s := settings{origins: map[string]origin{}, testClockOffsetFile: getenv(testClockOffsetEnv)}
	for i, st := range table {
		v, from := st.def, "default"
		if e := getenv(st.env); e != "" {
			v, from = e, st.env
		}
		if given[st.flag] {
			v, from = *values[i], "-"+st.flag
		}
		if err := st.set(&s, v); err != nil {
			return settings{}, fmt.Errorf("invalid %s: %w", from, err)
		}
		s.origins[st.flag] = origin{value: v}
		if from == st.env {
			s.origins[st.flag] = origin{value: v, env: st.env}
		}
	}
	return s, s.checkCombinations()
}

// boolFlag is a boolean setting's text: "-flag" alone sets it to "true",
// and its value is checked by its setter, as every other setting's.
type boolFlag string

func (b *boolFlag) String() string     { return string(*b) }
func (b *boolFlag) Set(v string) error { *b = boolFlag(v); return nil }
func (b *boolFlag) IsBoolFlag() bool   { return true }

// checkCombinations rejects settings that only make sense together.
func (s settings) checkCombinations() error {
	if err := s.checkAdmin(); err != nil {
		return err
	}
	switch {
	case s.tlsCert != "" && s.tlsKey == "":
		return errors.New("-tls-cert needs -tls-key: give the certificate's private key too")
	case s.tlsKey != "" && s.tlsCert == "":
		return errors.New("-tls-key needs -tls-cert: give the certificate the key belongs to")
	case s.tlsClientCA != "" && s.tlsCert == "":
		return errors.New("-tls-client-ca needs -tls-cert and -tls-key: mutual TLS runs on a TLS port")
	case s.tlsTickets != "" && s.tlsCert == "":
		return errors.New("-tls-ticket-keys needs -tls-cert and -tls-key: session tickets resume TLS sessions")
	case s.aclFile != "" && s.tlsClientCA == "":
		return errors.New("-acl-file needs -tls-client-ca: the ACL matches identities from client certificates")
	}
	return s.checkHA()
}

// checkHA rejects failover settings that cannot work together.
func (s settings) checkHA() error {
	if len(s.haEtcd) == 0 {
		for _, flag := range []string{"ha-cluster", "ha-name", "ha-etcd-ca", "ha-etcd-cert", "ha-etcd-key"} {
			if s.origins[flag].value != "" {
				return fmt.Errorf("-%s needs -ha-etcd: it configures failover through etcd; give the etcd endpoints too, or drop it", flag)
			}
		}
		return nil
	}
	switch {
	case s.haCluster == "":
		return errors.New("-ha-etcd needs -ha-cluster: name the cluster (its keys live under /monolock/NAME/ in etcd), the same on every node")
	case (s.haCert == "") != (s.haKey == ""):
		return errors.New("-ha-etcd-cert and -ha-etcd-key go together: give the client certificate and its key, or neither")
	}
	_, port, err := net.SplitHostPort(s.listen)
	if err == nil && (port == "0" || port == "") {
		return fmt.Errorf("%s: with -ha-etcd the lock port opens each time this node leads, and clients must find it at a known address: give a fixed port, such as 0.0.0.0:7070", s.describe("listen"))
	}
	return nil
}

// clusterName is what a cluster's name may be: a piece of an etcd key.
var clusterName = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// parseEndpoints reads the etcd endpoints: comma-separated http or https
// URLs with a host.
func parseEndpoints(v string) ([]string, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	var eps []string
	for _, e := range strings.Split(v, ",") {
		e = strings.TrimSpace(e)
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("want comma-separated etcd client URLs such as http://192.0.2.10:2379,http://192.0.2.11:2379, got %q", e)
		}
		eps = append(eps, e)
	}
	return eps, nil
}

func printUsage(w io.Writer) {
	fmt.Fprintf(w, "monolock: a single-node lock server (wire protocol v1)\n\nUsage: monolock [flags]\n\nEvery flag has an environment variable; a flag beats the environment, which beats the default.\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  FLAG\tENVIRONMENT\tDEFAULT\tMEANING")
	for _, st := range table {
		def := st.def
		if def == "" {
			def = "(off)"
		}
		fmt.Fprintf(tw, "  -%s\t%s\t%s\t%s\n", st.flag, st.env, def, st.usage)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\nThere is no lease or heartbeat setting (clients choose their lease) and no connection limit on the protocol port (the ops and admin ports serve at most 64 connections each).\nSIGTERM or SIGINT shuts down gracefully: /readyz turns 503, the protocol port serves on for -shutdown-delay (a second signal ends the delay), then every session gets ERROR 0x01. SIGHUP rereads the TLS files (the admin port's too), the session-ticket keys, the ACL and the admin ACL, and reopens the audit log.\n")
}

// positiveDuration parses v into dst, which must be a Go duration above 0;
// the error shows example.
func positiveDuration(dst *time.Duration, v, example string) error {
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return fmt.Errorf("want a positive Go duration such as %s, got %q", example, v)
	}
	*dst = d
	return nil
}
