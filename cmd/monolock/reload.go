package main

import (
	"context"
	"time"

	"github.com/monolock/monolock/internal/acl"
)

// reload applies SIGHUP: reread the TLS material and the ACL, the admin
// port's too, and reopen the audit file for log rotation. Any failure keeps the previous good state.
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
	d.reloadAdmin()
	if d.audit != nil {
		if err := d.audit.Reopen(); err != nil {
			d.log.Error().Err(err).Msg("SIGHUP: cannot reopen the audit log; still writing to the old file")
		} else {
			d.log.Info().Str("audit_log", d.cfg.auditLog).Msg("SIGHUP: audit log reopened")
		}
	}
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
