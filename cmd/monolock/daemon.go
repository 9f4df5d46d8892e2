package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/monolock/monolock/eventloop"
	"github.com/monolock/monolock/eventloop/acl"
	"github.com/monolock/monolock/eventloop/audit"
	"github.com/monolock/monolock/eventloop/certs"
	"github.com/monolock/monolock/eventloop/metrics"
	"github.com/monolock/monolock/eventloop/opshttp"
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

func openFiles(cfg settings) (f files, err error) {
	if cfg.tlsCert != "" {
		if f.certs, err = certs.NewReloader(certs.Files{Cert: cfg.tlsCert, Key: cfg.tlsKey, ClientCA: cfg.tlsClientCA}); err != nil {
			return f, err
		}
	}
	if cfg.aclFile != "" {
		if f.rules, err = acl.Load(cfg.aclFile); err != nil {
			return f, err
		}
	}
	if cfg.auditLog != "" {
		if f.audit, err = audit.Open(cfg.auditLog); err != nil {
			return f, err
		}
	}
	return f, nil
}

// start brings everything up, or nothing: a failure closes what was opened.
func start(cfg settings, log zerolog.Logger, f files) (d *daemon, err error) {
	d = &daemon{cfg: cfg, log: log, certs: f.certs, audit: f.audit, failed: make(chan error, 3)}
	opened := d // "return nil, err" clears d before the deferred call runs
	defer func() {
		if err != nil {
			opened.closeAll()
		}
	}()
	srvCfg := eventloop.Config{
		ListenAddress: cfg.listen,
		IOTimeout:     cfg.ioTimeout,
		Logger:        log,
		Audit:         d.audit,
	}
	// Metrics cost a little on every frame; without an endpoint to read them
	// the server does not keep them.
	registry := prometheus.NewRegistry()
	if cfg.opsListen != "" {
		srvCfg.Metrics = metrics.New(registry)
	}
	if f.certs != nil {
		srvCfg.TLS = f.certs.ServerConfig()
	}
	if f.rules != nil {
		srvCfg.Authorizer = f.rules
	}
	d.srv, err = eventloop.New(srvCfg)
	if err != nil {
		return nil, err
	}
	if cfg.opsListen != "" {
		if d.ops, err = d.serveHTTP("ops", cfg.opsListen, opshttp.NewHandler(registry, &d.health)); err != nil {
			return nil, err
		}
	}
	if cfg.adminListen != "" {
		if d.admin, err = d.serveHTTP("admin", cfg.adminListen, d.adminHandler()); err != nil {
			return nil, err
		}
		if !isLoopback(d.admin.Addr) {
			log.Warn().Str("admin_listen", d.admin.Addr).Msg("the admin API has no authentication and listens beyond loopback; bind it to 127.0.0.1 unless a firewall guards it")
		}
	}
	go func() {
		if err := d.srv.Serve(); err != nil {
			d.failed <- err
		}
	}()
	ev := log.Info().Str("version", version).Str("listen", d.srv.Addr().String()).Dur("io_timeout", cfg.ioTimeout)
	if d.ops != nil {
		ev = ev.Str("ops_listen", d.ops.Addr)
	}
	if d.admin != nil {
		ev = ev.Str("admin_listen", d.admin.Addr)
	}
	ev.Bool("tls", cfg.tlsCert != "").Bool("mtls", cfg.tlsClientCA != "").Str("acl_file", cfg.aclFile).
		Str("audit_log", cfg.auditLog).Msg("monolock started")
	return d, nil
}

// serveHTTP listens on addr and serves h in the background. The returned
// server's Addr is the bound address.
func (d *daemon) serveHTTP(name, addr string, h http.Handler) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s listen on %s: %w", name, addr, err)
	}
	hs := &http.Server{Addr: ln.Addr().String(), Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.failed <- fmt.Errorf("%s server: %w", name, err)
		}
	}()
	return hs, nil
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
// stops accepting and closes every session with ERROR 0x01, then the HTTP
// sides stop and the audit stream is flushed.
func (d *daemon) shutdown(signals <-chan os.Signal) int {
	d.health.Drain()
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
		if err := d.audit.Close(); err != nil {
			d.log.Error().Err(err).Msg("closing the audit log")
			status = 1
		}
	}
	d.log.Info().Msg("monolock stopped")
	return status
}

// closeAll releases what start opened when start fails.
func (d *daemon) closeAll() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if d.srv != nil {
		_ = d.srv.Shutdown(ctx)
	}
	for _, hs := range []*http.Server{d.admin, d.ops} {
		if hs != nil {
			_ = hs.Close()
		}
	}
	if d.audit != nil {
		_ = d.audit.Close()
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
