package main

import (
	"net/http"
	"time"

	"github.com/monolock/monolock/internal/adminhttp"
)

// adminHandler serves the admin API over the running server.
func (d *daemon) adminHandler() http.Handler {
	opsListen := d.cfg.opsListen
	if d.ops != nil {
		opsListen = d.ops.Addr // the bound address, not ":0"
	}
	return adminhttp.New(d.srv, adminhttp.Info{
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
	})
}
