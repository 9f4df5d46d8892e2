package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/monolock/monolock/eventloop"
	"github.com/monolock/monolock/internal/acl"
	"github.com/monolock/monolock/internal/audit"
	"github.com/monolock/monolock/internal/certs"
	"github.com/monolock/monolock/internal/metrics"
	"github.com/monolock/monolock/internal/opshttp"
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
}

// files is what the settings name on disk, read before anything starts so
// that a bad file is a configuration error.
type files struct {
	certs *certs.Reloader // nil without TLS
	rules *acl.Rules      // nil without an ACL
	audit *audit.Log      // nil without an audit log
}

func openFiles(cfg settings, log zerolog.Logger) (f files, err error) {
	if cfg.tlsCert != "" {
		if f.certs, err = certs.NewReloader(certs.Files{Cert: cfg.tlsCert, Key: cfg.tlsKey, ClientCA: cfg.tlsClientCA, TicketKeys: cfg.tlsTickets}); err != nil {
			return f, err
		}
	}
	if cfg.aclFile != "" {
		if f.rules, err = acl.Load(cfg.aclFile); err != nil {
			return f, err
		}
	}
	if cfg.auditLog != "" {
		if f.audit, err = audit.Open(cfg.auditLog, audit.WithLogger(log)); err != nil {
			return f, err
		}
	}
	return f, nil
}

// start brings everything up, or nothing: a failure closes what was opened,
// the audit log of f included, and says which setting was at fault.
func start(cfg settings, log zerolog.Logger, f files) (*daemon, error) {
	d := &daemon{cfg: cfg, log: log, certs: f.certs, audit: f.audit, failed: make(chan error, 3)}
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
	// that runs this binary (internal/testsupport/proc): written once every
	// listener is bound and the loop is started (a connection made after it
	// is accepted and served), with -log-format json it is
	// {"message":"monolock started","listen":…,"ops_listen":…,"admin_listen":…}
	// where the addresses are the bound ones (port 0 resolved) and
	// ops_listen and admin_listen appear only when those ports are on. With
	// an ops port, /readyz answering 200 completes it. Change the message
	// or these field names only together with proc.
	ev := log.Info().Str("version", version).Str("listen", d.srv.Addr().String()).Dur("io_timeout", cfg.ioTimeout)
	if d.ops != nil {
		ev = ev.Str("ops_listen", d.ops.Addr)
	}
	if d.admin != nil {
		ev = ev.Str("admin_listen", d.admin.Addr)
	}
	if d.ops != nil || d.admin != nil {
		ev = ev.Int("http_max_conns", d.httpLimits().MaxConns)
	}
	ev.Bool("tls", cfg.tlsCert != "").Bool("mtls", cfg.tlsClientCA != "").Str("tls_ticket_keys", cfg.tlsTickets).Str("acl_file", cfg.aclFile).
		Str("audit_log", cfg.auditLog).Msg("monolock started")
	return d, nil
}

// open starts the event loop and the HTTP servers; what it opened before
// an error stays in d for closeAll.
func (d *daemon) open(f files) (err error) {
	cfg := d.cfg
	srvCfg := eventloop.Config{
		ListenAddress:    cfg.listen,
		IOTimeout:        cfg.ioTimeout,
		MaxTLSHandshakes: cfg.handshakes,
		Logger:           d.log,
	}
	if d.audit != nil {
		srvCfg.Audit = audit.NewRecorder(d.audit)
	}
	// Metrics cost a little on every frame; without an endpoint to read them
	// the server does not keep them.
	registry := prometheus.NewRegistry()
	if cfg.opsListen != "" {
		srvCfg.Metrics = metrics.New(registry)
		if d.audit != nil {
			metrics.RegisterAudit(registry, d.audit)
		}
	}
	if f.certs != nil {
		srvCfg.TLS = f.certs.ServerConfig()
		srvCfg.Identity = certs.Identity
	}
	if f.rules != nil {
		srvCfg.Authorizer = f.rules
	}
	if d.srv, err = eventloop.New(srvCfg); err != nil {
		if isListenError(err) {
			return listenError(cfg.describe("listen"), "127.0.0.1:7070", err)
		}
		return err
	}
	d.health.Live = d.srv.Probe
	if d.audit != nil {
		d.health.Ready = d.audit.Health
	}
	if cfg.opsListen != "" {
		if d.ops, err = d.serveHTTP("ops", cfg.opsListen, opshttp.NewHandler(registry, &d.health)); err != nil {
			return listenError(cfg.describe("ops-listen"), "127.0.0.1:9090", err)
		}
	}
	if cfg.tlsTickets != "" {
		warnIfShared(d.log, cfg.tlsTickets)
	}
	if cfg.adminListen != "" {
		if d.admin, err = d.serveHTTP("admin", cfg.adminListen, d.adminHandler()); err != nil {
			return listenError(cfg.describe("admin-listen"), "127.0.0.1:7071", err)
		}
		if !isLoopback(d.admin.Addr) {
			d.log.Warn().Str("admin_listen", d.admin.Addr).Msg("the admin API has no authentication and listens beyond loopback; bind it to 127.0.0.1 unless a firewall guards it")
		}
	}
	return nil
}

// serveHTTP listens on addr and serves h in the background, within the
// daemon's HTTP limits. The returned server's Addr is the bound address.
func (d *daemon) serveHTTP(name, addr string, h http.Handler) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	lim := d.httpLimits()
	hs := opshttp.NewServer(h, lim, d.log.With().Str("http_server", name).Logger())
	hs.Addr = ln.Addr().String()
	ln = opshttp.LimitListener(hs, ln, lim.MaxConns)
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.failed <- fmt.Errorf("%s server: %w", name, err)
		}
	}()
	return hs, nil
}

func (d *daemon) httpLimits() opshttp.Limits {
	if d.cfg.httpLimits.MaxConns == 0 {
		return opshttp.DefaultLimits(descriptorLimit())
	}
	return d.cfg.httpLimits
}

// descriptorLimit is the soft RLIMIT_NOFILE, which the Go runtime has
// already raised to the hard limit.
func descriptorLimit() uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 1024 // the common default; errs towards a small cap
	}
	return rl.Cur
}

func isListenError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "listen"
}

// listenError says which setting named an address that cannot be listened
// on, why, and what to do; example is a good address for that setting.
func listenError(setting, example string, err error) error {
	var (
		op      *net.OpError
		addrErr *net.AddrError
		dnsErr  *net.DNSError
		why     string
	)
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		why = "address already in use: another process (or another monolock listener) holds this port; stop it or choose another port"
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		why = "cannot assign requested address: no network interface of this host has this IP address; use one of its addresses, or 0.0.0.0 for all of them"
	case errors.Is(err, syscall.EACCES):
		why = "permission denied: ports below 1024 need root or CAP_NET_BIND_SERVICE; choose a port from 1024 up"
	case errors.As(err, &addrErr):
		why = fmt.Sprintf("%s; want host:port with a port from 0 to 65535, such as %s", addrErr.Err, example)
	case errors.As(err, &dnsErr):
		why = fmt.Sprintf("%v; want an IP address (or a host name this machine resolves) and a numeric port, such as %s", dnsErr, example)
	case errors.As(err, &op):
		why = op.Err.Error()
	default:
		why = err.Error()
	}
	return fmt.Errorf("%s: %s", setting, why)
}

// reload applies SIGHUP: reread the TLS material and the ACL, reopen the
// audit file for log rotation. Any failure keeps the previous good state.
func (d *daemon) reload() {
	if d.certs != nil {
		if err := d.certs.Reload(); err != nil {
			d.log.Error().Err(err).Msg("SIGHUP: TLS files not reloaded; new connections keep the previous certificate and CA")
		} else {
			d.log.Info().Msg("SIGHUP: TLS files reloaded; new connections use them")
		}
		if n, err := d.certs.ReloadTicketKeys(); err != nil {
			d.log.Error().Err(err).Msg("SIGHUP: session-ticket keys not reloaded; the previous keys stay in use")
		} else if n > 0 {
			d.log.Info().Int("ticket_keys", n).Str("tls_ticket_keys", d.cfg.tlsTickets).Msg("SIGHUP: session-ticket keys reloaded; the first one issues new tickets")
		}
	}
	if d.cfg.aclFile != "" {
		d.reloadACL()
	}
	if d.audit != nil {
		if err := d.audit.Reopen(); err != nil {
			d.log.Error().Err(err).Msg("SIGHUP: cannot reopen the audit log; still writing to the old file")
		} else {
			d.log.Info().Str("audit_log", d.cfg.auditLog).Msg("SIGHUP: audit log reopened")
		}
	}
}

// shutdown follows the documented order: health turns 503, the protocol side
// serves on for the shutdown delay, then stops accepting and closes every
// session with ERROR 0x01, then the HTTP sides stop and the audit stream is
// flushed.
func (d *daemon) shutdown(signals <-chan os.Signal) int {
	d.health.Drain()
	d.serveDelay(signals)
	ctx, cancel := shutdownContext(signals, d.log)
	defer cancel()
	status := 0
	if err := d.srv.Shutdown(ctx); err != nil {
		d.log.Error().Err(err).Msg("protocol shutdown did not finish")
		status = 1
	}
	for _, hs := range []*http.Server{d.admin, d.ops} {
		if hs != nil {
			if err := hs.Shutdown(ctx); err != nil {
				_ = hs.Close()
			}
		}
	}
	if d.audit != nil {
		if err := closeAudit(ctx, d.audit); err != nil {
			d.log.Error().Err(err).Msg("closing the audit log")
			status = 1
		}
	}
	d.log.Info().Msg("monolock stopped")
	return status
}

// closeAudit flushes and closes the audit log, but waits no longer than
// ctx: a destination that hangs must not keep the process from exiting.
func closeAudit(ctx context.Context, l *audit.Log) error {
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	select {
	case err := <-closed:
		return err
	case <-ctx.Done():
		return fmt.Errorf("the audit log did not flush within the shutdown grace; up to %d bytes of events are lost: %w", l.PendingBytes(), ctx.Err())
	}
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
	if d.audit != nil {
		if err := closeAudit(ctx, d.audit); err != nil {
			d.log.Error().Err(err).Msg("closing the audit log after a failed start")
		}
	}
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// reloadACL replaces the ACL for new ACQUIREs; a bad file keeps the old rules.
func (d *daemon) reloadACL() {
	rules, err := acl.Load(d.cfg.aclFile)
	if err != nil {
		d.log.Error().Err(err).Msg("SIGHUP: ACL not reloaded; the previous rules stay in force")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.srv.SetAuthorizer(ctx, rules); err != nil {
		d.log.Error().Err(err).Msg("SIGHUP: ACL not applied; the previous rules stay in force")
		return
	}
	d.log.Info().Int("rules", rules.Len()).Msg("SIGHUP: ACL reloaded")
}

// serveDelay keeps the protocol port serving, new connections included, for
// the shutdown delay while /readyz already answers 503: a load balancer or a
// keepalived check that polls readiness moves new clients elsewhere before
// anyone is told to leave. A second SIGTERM or SIGINT ends the delay; SIGHUP
// still reloads.
func (d *daemon) serveDelay(signals <-chan os.Signal) {
	if d.cfg.shutdownDelay <= 0 {
		return
	}
	d.log.Info().Dur("shutdown_delay", d.cfg.shutdownDelay).Msg("readiness is 503; serving on for the shutdown delay before sessions get ERROR 0x01")
	timer := time.NewTimer(d.cfg.shutdownDelay)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			d.log.Info().Msg("shutdown delay over: every session gets ERROR 0x01")
			return
		case err := <-d.failed:
			d.log.Error().Err(err).Msg("a server stopped during the shutdown delay; shutting down now")
			return
		case sig := <-signals:
			if sig == syscall.SIGHUP {
				d.reload()
				continue
			}
			d.log.Info().Stringer("signal", sig).Msg("second signal: shutdown delay ended early; every session gets ERROR 0x01")
			return
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
