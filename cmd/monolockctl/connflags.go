package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/monolock/monolock/client"
)

// connectTimeout bounds the TCP connect (and TLS handshake), so an address that
// drops packets fails as unreachable instead of hanging.
const connectTimeout = 10 * time.Second

// connFlags are the connection flags every command takes.
type connFlags struct {
	// addr is the server's address, or several separated by commas (a
	// primary and its standbys): the client starts from the one that last
	// worked and tries the others when a connect fails.
	addr, tlsCA, tlsCert, tlsKey string
	addrFrom                     string // where addr came from, for messages: "from -addr", "from MONOLOCK_ADDRESS", "the default"
}

// addConnFlags registers the connection flags on fs. A flag's default is its
// environment variable when set, so a flag beats the environment, which beats
// the built-in default (and -h shows the value in effect).
func addConnFlags(fs *flag.FlagSet, getenv func(string) string) *connFlags {
	c := &connFlags{addr: client.DefaultAddress, addrFrom: "the default"}
	if v := getenv("MONOLOCK_ADDRESS"); v != "" {
		c.addr, c.addrFrom = v, "from MONOLOCK_ADDRESS"
	}
	fs.Var(addrFlag{&c.addr, &c.addrFrom}, "addr", "`host:port` of the server; several, for a primary and its standbys, separated by commas or in repeated -addr flags (env MONOLOCK_ADDRESS)")
	fs.StringVar(&c.tlsCA, "tls-ca", getenv("MONOLOCK_TLS_CA"),
		"PEM `file` with the CAs that sign the server's certificate; any -tls-* flag turns TLS on, without -tls-ca the system roots are used (env MONOLOCK_TLS_CA)")
	fs.StringVar(&c.tlsCert, "tls-cert", getenv("MONOLOCK_TLS_CERT"),
		"PEM client certificate `file` for mutual TLS, with -tls-key (env MONOLOCK_TLS_CERT)")
	fs.StringVar(&c.tlsKey, "tls-key", getenv("MONOLOCK_TLS_KEY"),
		"PEM private key `file` of -tls-cert (env MONOLOCK_TLS_KEY)")
	return c
}

// addrFlag is -addr. Its value is checked when the flag is parsed, so that an
// address no one could dial is a usage error (exit 2), not an unreachable
// server (exit 69). A repeated -addr adds its addresses to the earlier ones;
// the first replaces the environment's or the default.
type addrFlag struct{ addr, from *string }

func (a addrFlag) String() string {
	if a.addr == nil {
		return ""
	}
	return *a.addr
}

func (a addrFlag) Set(s string) error {
	if err := checkAddresses(s); err != nil {
		return err
	}
	if *a.from == "from -addr" {
		s = *a.addr + "," + s
	}
	*a.addr, *a.from = s, "from -addr"
	return nil
}

// unreachableHint says what to check when nothing answered at the address.
func (c *connFlags) unreachableHint() string {
	if strings.Contains(c.addr, ",") {
		return fmt.Sprintf("is a server running and listening on one of %s (%s)? Set the addresses with -addr or MONOLOCK_ADDRESS", strings.ReplaceAll(c.addr, ",", ", "), c.addrFrom)
	}
	return fmt.Sprintf("is the server running and listening on %s (%s)? Set its address with -addr or MONOLOCK_ADDRESS", c.addr, c.addrFrom)
}

// checkAddresses checks each address of a comma-separated list.
func checkAddresses(list string) error {
	for _, a := range strings.Split(list, ",") {
		if err := checkAddress(a); err != nil {
			return err
		}
	}
	return nil
}

// checkAddress accepts what a TCP dial can use: host:port with a port number
// or a service name (an empty host means this machine).
func checkAddress(s string) error {
	_, port, err := net.SplitHostPort(s)
	switch {
	case strings.TrimSpace(s) != s:
		// Either end: a host with a leading space would fail only at the
		// lookup, and look like an unreachable server.
		return fmt.Errorf("%q has white space around it; remove it", s)
	case err != nil || port == "":
		return fmt.Errorf("want host:port, such as 127.0.0.1:7070, got %q", s)
	case strings.TrimLeft(port, "0123456789") == "":
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("port %s of %q is not between 1 and 65535", port, s)
		}
	default:
		if _, err := net.LookupPort("tcp", port); err != nil {
			return fmt.Errorf("port %q of %q is neither a number nor a known service", port, s)
		}
	}
	return nil
}

func envOr(getenv func(string) string, key, fallback string) string {
	if v := getenv(key); v != "" {
		return v
	}
	return fallback
}

// client builds the protocol client the flags describe. wrap, when given,
// wraps the dialer (run uses it to see the lock's connection).
func (c *connFlags) client(wrap ...func(client.Dialer) client.Dialer) (*client.Client, error) {
	if err := checkAddresses(c.addr); err != nil { // from MONOLOCK_ADDRESS; -addr is checked when parsed
		return nil, fmt.Errorf("MONOLOCK_ADDRESS: %w", err)
	}
	d, err := c.dialer()
	if err != nil {
		return nil, err
	}
	for _, w := range wrap {
		d = w(d)
	}
	return client.New(client.Config{Addrs: strings.Split(c.addr, ","), Dialer: d, ConnectTimeout: connectTimeout}), nil
}

// dialer is the Dialer the flags describe. The connect timeout is the
// client's (Config.ConnectTimeout), which bounds the connects to every
// address of an attempt together.
func (c *connFlags) dialer() (client.Dialer, error) {
	plain := &net.Dialer{}
	cfg, err := c.tlsConfig()
	if err != nil || cfg == nil {
		return plain, err
	}
	return &tls.Dialer{NetDialer: plain, Config: cfg}, nil
}

// tlsConfig is the TLS configuration the -tls-* flags describe, nil when none
// is set.
func (c *connFlags) tlsConfig() (*tls.Config, error) {
	return clientTLS("tls", c.tlsCA, c.tlsCert, c.tlsKey)
}

// clientTLS is the TLS configuration of a CA file, a client certificate and
// its key, nil when none is given; prefix names their flags in errors
// (-PREFIX-ca, -PREFIX-cert, -PREFIX-key).
func clientTLS(prefix, ca, certFile, keyFile string) (*tls.Config, error) {
	if ca == "" && certFile == "" && keyFile == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("-%s-ca: %w", prefix, err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-%s-ca: no PEM certificate in %s", prefix, ca)
		}
	}
	if (certFile == "") != (keyFile == "") {
		return nil, fmt.Errorf("-%s-cert and -%s-key go together", prefix, prefix)
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("-%s-cert/-%s-key: %w", prefix, prefix, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	// `monolockctl run` reconnects in the same process after a restart or a
	// failover; against servers that keep their session-ticket keys
	// (-tls-ticket-keys) the reconnection resumes the session: no signature
	// on either side.
	cfg.ClientSessionCache = tls.NewLRUClientSessionCache(0)
	return cfg, nil
}
