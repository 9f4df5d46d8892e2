package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/monolock/monolock/eventloop"
	"github.com/monolock/monolock/internal/acl"
	"github.com/monolock/monolock/internal/adminhttp"
	"github.com/monolock/monolock/internal/certs"
	"github.com/monolock/monolock/internal/hostcheck"
)

// The admin port: HTTPS with -admin-tls-cert and -admin-tls-key, mutual TLS
// with -admin-tls-client-ca, under which every call needs a role that
// -admin-acl-file grants the caller's certificate identity. It fails closed:
// beyond loopback the server refuses to start without mutual TLS, unless
// -admin-allow-unauthenticated says the operator accepts the risk.

// checkAdmin rejects admin settings that do not make sense together, and an
// admin API that anyone beyond this host could call.
func (s settings) checkAdmin() error {
	switch {
	case s.adminTLSCert != "" && s.adminTLSKey == "":
		return errors.New("-admin-tls-cert needs -admin-tls-key: give the certificate's private key too")
	case s.adminTLSKey != "" && s.adminTLSCert == "":
		return errors.New("-admin-tls-key needs -admin-tls-cert: give the certificate the key belongs to")
	case s.adminTLSClientCA != "" && s.adminTLSCert == "":
		return errors.New("-admin-tls-client-ca needs -admin-tls-cert and -admin-tls-key: mutual TLS runs on an HTTPS port (they may name -tls-cert's files)")
	case s.adminACLFile != "" && s.adminTLSClientCA == "":
		return errors.New("-admin-acl-file needs -admin-tls-client-ca: the admin ACL grants roles to identities from operator certificates")
	case s.adminTLSClientCA != "" && s.adminACLFile == "":
		return errors.New(`-admin-tls-client-ca needs -admin-acl-file: under mutual TLS every admin call needs a role; grant them in a file such as {"rules": [{"identity": "spiffe://prod/oncall/*", "roles": ["read", "release", "kick"]}]}`)
	case s.adminAllowUnauthenticated && s.adminTLSClientCA != "":
		return errors.New("-admin-allow-unauthenticated contradicts -admin-tls-client-ca: with mutual TLS the admin API is authenticated; drop one of them")
	case s.adminListen == "" && (s.adminTLSCert != "" || s.adminACLFile != "" || s.adminAllowUnauthenticated):
		return errors.New("the -admin-tls-*, -admin-acl-file and -admin-allow-unauthenticated settings need -admin-listen: give the admin API's address")
	case s.adminListen != "" && !loopbackAddress(s.adminListen):
		return s.checkExposedAdmin("")
	}
	return nil
}

// checkExposedAdmin is the fail-closed rule for an admin API that is not
// (or may not be) on loopback; bound is the address the kernel bound, when
// it is known.
func (s settings) checkExposedAdmin(bound string) error {
	if s.adminTLSClientCA != "" || s.adminAllowUnauthenticated {
		return nil
	}
	where := s.describe("admin-listen")
	if bound != "" {
		where += " (bound to " + bound + ")"
	}
	return fmt.Errorf("%s is not a loopback address, and the admin API there would let anyone who reaches it force-release any lock: "+
		"add mutual TLS (-admin-tls-cert, -admin-tls-key, -admin-tls-client-ca and -admin-acl-file, or their MONOLOCK_ADMIN_* variables), "+
		"or listen on 127.0.0.1, or accept the risk with -admin-allow-unauthenticated", where)
}

// loopbackAddress reports whether addr surely names a loopback address:
// a loopback IP, or "localhost". An empty host (every interface) or any
// other name does not: the rule fails closed.
func loopbackAddress(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// listenAdmin binds the admin port and checks, on the address the kernel
// bound ("localhost" resolved), that the fail-closed rule still holds; over
// TLS the listener hands net/http TLS connections, whose handshakes net/http
// bounds (opshttp.NewServer).
func (d *daemon) listenAdmin() (net.Listener, error) {
	ln, err := net.Listen("tcp", d.cfg.adminListen)
	if err != nil {
		return nil, listenError(d.cfg.describe("admin-listen"), "127.0.0.1:7071", err)
	}
	if !isLoopback(ln.Addr().String()) {
		if err := d.cfg.checkExposedAdmin(ln.Addr().String()); err != nil {
			_ = ln.Close()
			return nil, err
		}
		if d.cfg.adminTLSClientCA == "" {
			d.log.Warn().Str("admin_listen", ln.Addr().String()).Msg("the admin API has no authentication and listens beyond loopback (-admin-allow-unauthenticated): anyone who reaches it can force-release any lock; a firewall must guard it")
		}
	}
	return ln, nil
}

// adminTLS is the admin port's TLS configuration, nil for plain HTTP.
func (d *daemon) adminTLS() *tls.Config {
	if d.adminCerts == nil {
		return nil
	}
	return d.adminCerts.ServerConfig()
}

// loadAdminFiles reads the admin port's certificates and admin ACL.
func loadAdminFiles(cfg settings, f *files) (err error) {
	if cfg.adminTLSCert != "" {
		if f.adminCerts, err = certs.NewReloader(certs.Files{Cert: cfg.adminTLSCert, Key: cfg.adminTLSKey, ClientCA: cfg.adminTLSClientCA}); err != nil {
			return fmt.Errorf("admin TLS files (-admin-tls-cert, -admin-tls-key, -admin-tls-client-ca): %w", err)
		}
	}
	if cfg.adminACLFile != "" {
		if f.adminRules, err = acl.LoadAdmin(cfg.adminACLFile); err != nil {
			return fmt.Errorf("%s: %w", cfg.describe("admin-acl-file"), err)
		}
	}
	return nil
}

// adminHandler serves the admin API over the running server.
func (d *daemon) adminHandler() http.Handler {
	opsListen := d.cfg.opsListen
	if d.ops != nil {
		opsListen = d.ops.Addr // the bound address, not ":0"
	}
	info := adminhttp.Info{
		Version:   version,
		Started:   time.Now(),
		Listen:    d.srv.Addr().String(),
		OpsListen: opsListen,
		AuditLog:  d.cfg.auditLog,
		ACLFile:   d.cfg.aclFile,
		TLS:       d.cfg.tlsCert != "",
		MTLS:      d.cfg.tlsClientCA != "",
		IOTimeout: d.cfg.ioTimeout,
		Ready:     d.health.Readiness,
		Access:    d.adminAccess,
		Hosts:     d.hostRule(),
		Log:       d.log.With().Str("http_server", "admin").Logger(),
	}
	if d.ha != nil {
		info.HA = d.haInfo
	}
	if d.cfg.adminTLSClientCA != "" {
		info.Hosts = nil // callers present certificates: a rebinding page cannot
	}
	if d.adminMetrics != nil {
		info.Refusals = d.adminMetrics
	}
	return adminhttp.New(d.srv, info)
}

// The admin API declares what it needs of the server (adminhttp.Backend);
// the loop implements it without either importing the other.
var _ adminhttp.Backend = (*eventloop.Server)(nil)

// consoleURL is where a browser on this host finds the console of the admin
// port bound to bound: its address, or loopback for an address that stands
// for every interface. An IP address, never a name, so that the Host rule
// answers it.
func consoleURL(bound string, https bool) string {
	host, port, err := net.SplitHostPort(bound)
	if err != nil {
		host, port = bound, ""
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip.To4() == nil {
			host = "::1"
		}
	}
	scheme := "http"
	if https {
		scheme = "https"
	}
	if port == "" {
		return scheme + "://" + host + "/"
	}
	return scheme + "://" + net.JoinHostPort(host, port) + "/"
}

// hostRule is the Host rule of the HTTP ports without client
// authentication: the ops port, and the admin port without mutual TLS.
func (d *daemon) hostRule() *hostcheck.Rule {
	return hostcheck.New(d.cfg.httpAllowedHosts, "-http-allowed-hosts or "+envOf("http-allowed-hosts")+" (comma-separated names)")
}

// reloadAdmin applies SIGHUP to the admin port: its certificates and its
// admin ACL; a failure keeps the previous ones.
func (d *daemon) reloadAdmin() {
	if d.adminCerts != nil {
		if err := d.adminCerts.Reload(); err != nil {
			d.log.Error().Err(err).Msg("SIGHUP: admin TLS files not reloaded; new admin connections keep the previous certificate and CA")
		} else {
			d.log.Info().Msg("SIGHUP: admin TLS files reloaded; new admin connections use them")
		}
	}
	if d.cfg.adminACLFile != "" {
		rules, err := acl.LoadAdmin(d.cfg.adminACLFile)
		if err != nil {
			d.log.Error().Err(err).Msg("SIGHUP: admin ACL not reloaded; the previous roles stay in force")
			return
		}
		d.adminAccess.SetRules(rules)
		d.log.Info().Int("rules", rules.Len()).Msg("SIGHUP: admin ACL reloaded")
	}
}
