package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/monolock/monolock/eventloop"
	"github.com/monolock/monolock/internal/acl"
	"github.com/monolock/monolock/internal/adminhttp"
	"github.com/monolock/monolock/internal/audit"
	"github.com/monolock/monolock/internal/certs"
	"github.com/monolock/monolock/internal/conffile"
	"github.com/monolock/monolock/internal/fdgate"
	"github.com/monolock/monolock/internal/metrics"
	"github.com/monolock/monolock/internal/opshttp"
	"github.com/monolock/monolock/internal/startline"
)

// daemon is the running server with its HTTP sides and audit stream.
type daemon struct {
	cfg    settings
	log    zerolog.Logger
	srv    *eventloop.Server
	health opshttp.Health
	audit  *audit.Log
	certs  *certs.Reloader // nil without TLS
	ops    *http.Server    // nil when off
	admin  *http.Server    // nil when off
	failed chan error      // a server that stopped on its own
	ha     *haNode         // nil without -ha-etcd

	adminCerts   *certs.Reloader       // nil without TLS on the admin port
	adminAccess  *adminhttp.Access     // who may call what on the admin API
	adminMetrics *metrics.AdminMetrics // nil without an ops port
	// descriptors lets the HTTP ports take a descriptor before the lock
	// port at the descriptor limit.
	descriptors *fdgate.Gate
}

// files is what the settings name on disk, read before anything starts so
// that a bad file is a configuration error.
type files struct {
	certs *certs.Reloader // nil without TLS
	rules *acl.Rules      // nil without an ACL
	audit *audit.Log      // nil without an audit log

	adminCerts *certs.Reloader // nil without TLS on the admin port
	adminRules *acl.AdminRules // nil without an admin ACL
}

func openFiles(cfg settings, log zerolog.Logger) (f files, err error) {
	for _, flag := range []string{"tls-cert", "tls-key", "tls-client-ca", "tls-ticket-keys", "acl-file", "admin-tls-cert", "admin-tls-key", "admin-tls-client-ca", "admin-acl-file"} {
		if err := cfg.checkReadable(flag); err != nil {
			return f, err
		}
	}
	if cfg.tlsCert != "" {
		if f.certs, err = certs.NewReloader(certs.Files{Cert: cfg.tlsCert, Key: cfg.tlsKey, ClientCA: cfg.tlsClientCA, TicketKeys: cfg.tlsTickets}); err != nil {
			return f, fmt.Errorf("TLS files (-tls-cert, -tls-key, -tls-client-ca, -tls-ticket-keys): %w", err)
		}
	}
	if cfg.aclFile != "" {
		if f.rules, err = acl.Load(cfg.aclFile); err != nil {
			return f, fmt.Errorf("%s: %w", cfg.describe("acl-file"), err)
		}
	}
	if err := loadAdminFiles(cfg, &f); err != nil {
		return f, err
	}
	if cfg.auditLog != "" {
		if f.audit, err = audit.Open(cfg.auditLog, audit.WithLogger(log)); err != nil {
			return f, fmt.Errorf("%s: %w", cfg.describe("audit-log"), err)
		}
	}
	return f, nil
}

// checkReadable says which setting names a file the server cannot read, and
// how to set it, before any loader reports the path alone. A path that names
// no regular file is refused without waiting for a writer (package conffile).
func (s settings) checkReadable(flag string) error {
	path := s.origins[flag].value
	if path == "" {
		return nil
	}
	fh, _, err := conffile.Open(path)
	if err == nil {
		return fh.Close()
	}
	why := err.Error()
	var pe *fs.PathError
	if errors.As(err, &pe) {
		why = pe.Err.Error()
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		why += "; check the path"
	case errors.Is(err, fs.ErrPermission):
		why += "; the server's user must be able to read it"
	}
	return fmt.Errorf("%s: %s (set the file with -%s or %s)", s.describe(flag), why, flag, envOf(flag))
}

// start brings everything up, or nothing: a failure closes what was opened,
// the audit log of f included, and says which setting was at fault.
func start(cfg settings, log zerolog.Logger, f files) (*daemon, error) {
	d := &daemon{cfg: cfg, log: log, certs: f.certs, audit: f.audit, failed: make(chan error, 3),
		adminCerts: f.adminCerts, adminAccess: adminhttp.OpenAccess()}
	if f.adminRules != nil {
		d.adminAccess = adminhttp.CertAccess(f.adminRules)
	}
	if err := d.open(f); err != nil {
		d.closeAll()
		return nil, err
	}
	go func() {
		if err := d.srv.Serve(); err != nil {
			d.failed <- err
		}
	}()
	// The start line is the readiness contract of every test and harness
	// that runs this binary (package startline): written once every
	// listener is bound and the loop is started, so a connection made after
	// it is accepted and served.
	ev := log.Info().Str(startline.Version, version).Str(startline.Listen, d.srv.Addr().String()).Dur("io_timeout", cfg.ioTimeout)
	if d.ops != nil {
		ev = ev.Str(startline.OpsListen, d.ops.Addr)
	}
	if d.admin != nil {
		ev = ev.Str(startline.AdminListen, d.admin.Addr)
	}
	if d.ops != nil || d.admin != nil {
		ev = ev.Int(startline.HTTPMaxConns, d.httpLimits().MaxConns)
	}
	if d.ha != nil {
		ev = ev.Fields(d.haStartFields())
	}
	if d.admin != nil {
		ev = ev.Bool("admin_tls", cfg.adminTLSCert != "").Bool("admin_mtls", cfg.adminTLSClientCA != "").Str("admin_acl_file", cfg.adminACLFile)
	}
	ev.Bool("tls", cfg.tlsCert != "").Bool("mtls", cfg.tlsClientCA != "").Str("tls_ticket_keys", cfg.tlsTickets).Str("acl_file", cfg.aclFile).
		Str("audit_log", cfg.auditLog).Msg(startline.Message)
	d.runHA()
	if d.admin != nil {
		// A line of its own, for whoever started the server by hand.
		u := consoleURL(d.admin.Addr, cfg.adminTLSCert != "")
		log.Info().Str("console", u).Msg("open the admin console at " + u)
	}
	return d, nil
}

// open starts the event loop and the HTTP servers; what it opened before
// an error stays in d for closeAll.
func (d *daemon) open(f files) (err error) {
	cfg := d.cfg
	d.descriptors = fdgate.New()
	srvCfg := eventloop.Config{
		Descriptors:        d.descriptors,
		ListenAddress:      cfg.listen,
		IOTimeout:          cfg.ioTimeout,
		MaxTLSHandshakes:   cfg.handshakes,
		WaiterSilenceLimit: cfg.silence,
		Logger:             d.log,
	}
	if d.audit != nil {
		srvCfg.Audit = audit.NewRecorder(d.audit)
	}
	if cfg.testClockOffsetFile != "" {
		srvCfg.TestWallClockOffset = (&fileClockOffset{path: cfg.testClockOffsetFile}).get
		d.log.Warn().Str("file", cfg.testClockOffsetFile).Msg(testClockOffsetEnv + " is set: the wall clock is moved by the offset in that file; for tests only, never on a real server")
	}
	// Metrics cost a little on every frame; without an endpoint to read them
	// the server does not keep them.
	registry := prometheus.NewRegistry()
	if cfg.opsListen != "" {
		srvCfg.Metrics = metrics.New(registry)
		if d.audit != nil {
			metrics.RegisterAudit(registry, d.audit)
		}
		d.adminMetrics = metrics.RegisterAdmin(registry)
	}
	if f.certs != nil {
		srvCfg.TLS = f.certs.ServerConfig()
		srvCfg.Identity = certs.Identity
	}
	if f.rules != nil {
		srvCfg.Authorizer = f.rules
	}
	node, err := newHANode(cfg, d, srvCfg.TestWallClockOffset)
	if err != nil {
		return err
	}
	if node != nil {
		srvCfg.HA = &eventloop.HAConfig{TTL: cfg.haTTL, Coordinator: node}
	}
	if d.srv, err = eventloop.New(srvCfg); err != nil {
		if node != nil {
			_ = node.Close()
		}
		if isListenError(err) {
			return listenError(cfg.describe("listen"), "127.0.0.1:7070", err)
		}
		return err
	}
	d.health.Live = d.srv.Probe
	var ready []func() error
	if d.audit != nil {
		ready = append(ready, d.audit.Health)
	}
	if node != nil {
		d.ha = &haNode{node: node, done: make(chan struct{})}
		ready = append(ready, d.haReady)
		if cfg.opsListen != "" {
			metrics.RegisterHA(registry, d.haMetricsStatus)
		}
	}
	if len(ready) > 0 {
		d.health.Ready = func() error {
			for _, r := range ready {
				if err := r(); err != nil {
					return err
				}
			}
			return nil
		}
	}
	if cfg.opsListen != "" {
		ln, err := net.Listen("tcp", cfg.opsListen)
		if err != nil {
			return listenError(cfg.describe("ops-listen"), "127.0.0.1:9090", err)
		}
		d.ops = d.serveHTTP("ops", ln, nil, opshttp.NewHandler(registry, &d.health, d.hostRule()))
	}
	if cfg.tlsTickets != "" {
		warnIfShared(d.log, cfg.tlsTickets)
	}
	if cfg.adminListen != "" {
		ln, err := d.listenAdmin()
		if err != nil {
			return err
		}
		d.admin = d.serveHTTP("admin", ln, d.adminTLS(), d.adminHandler())
	}
	return nil
}

// closeAll releases what start opened when start fails. No session exists
// yet, so the protocol side stops at once.
func (d *daemon) closeAll() {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	for _, hs := range []*http.Server{d.admin, d.ops} {
		if hs != nil {
			_ = hs.Close()
		}
	}
	if d.srv != nil {
		if err := d.srv.Shutdown(ctx); err != nil {
			d.log.Error().Err(err).Msg("stopping the event loop after a failed start")
		}
	}
	d.stopHA(ctx)
	if d.audit != nil {
		if err := closeAudit(ctx, d.audit); err != nil {
			d.log.Error().Err(err).Msg("closing the audit log after a failed start")
		}
	}
}

// warnIfShared warns when the session-ticket key file can be read by others
// than the server's user: with it anyone can mint tickets that resume as a
// client identity.
func warnIfShared(log zerolog.Logger, path string) {
	st, err := os.Stat(path)
	if err == nil && st.Mode().Perm()&0o077 != 0 {
		log.Warn().Str("tls_ticket_keys", path).Stringer("mode", st.Mode().Perm()).
			Msg("the session-ticket key file is readable by group or others; whoever reads it can resume TLS sessions as any client: chmod 600 it")
	}
}
