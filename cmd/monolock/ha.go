package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/monolock/monolock/internal/haetcd"
	"github.com/monolock/monolock/internal/startline"
	"github.com/monolock/monolock/protocol/admin"
)

// Failover through etcd (-ha-etcd): the daemon runs the etcd side (package
// haetcd) beside the event loop, which owns the rules (eventloop, ha.go),
// and shows the node's role on /readyz, /api/info and /metrics.

// haNode is the running etcd side.
type haNode struct {
	node   *haetcd.Node
	cancel context.CancelFunc // nil until runHA
	done   chan struct{}      // closed when Run has returned
}

// newHANode makes the etcd side from the settings; nil without -ha-etcd.
// testWallClockOffset is the test-only knob's (testclock.go), nil on a real
// server.
func newHANode(cfg settings, d *daemon, testWallClockOffset func() time.Duration) (*haetcd.Node, error) {
	if len(cfg.haEtcd) == 0 {
		return nil, nil
	}
	c := haetcd.Config{Endpoints: cfg.haEtcd, Cluster: cfg.haCluster, TTL: cfg.haTTL, Name: cfg.haName, Logger: d.log,
		TestWallClockOffset: testWallClockOffset}
	if c.Name == "" {
		host, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("-ha-name is empty and the host name is unknown (%w): set -ha-name", err)
		}
		c.Name = host
	}
	if cfg.haCA != "" || cfg.haCert != "" {
		t, err := haetcd.TLSConfig(cfg.haCA, cfg.haCert, cfg.haKey)
		if err != nil {
			return nil, fmt.Errorf("-ha-etcd-ca, -ha-etcd-cert, -ha-etcd-key: %w", err)
		}
		c.TLS = t
	}
	return haetcd.New(c)
}

// runHA starts campaigning; start calls it once the start line is out,
// so that every line of the node's roles follows it.
func (d *daemon) runHA() {
	if d.ha == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.ha.cancel = cancel
	go func() {
		defer close(d.ha.done)
		_ = d.ha.node.Run(ctx, d.srv)
	}()
}

// stopHA resigns (once the lock port has stopped granting: a resignation
// while it still granted would let a new leader start too early) and closes
// the etcd client, within ctx.
func (d *daemon) stopHA(ctx context.Context) {
	if d.ha == nil {
		return
	}
	if d.ha.cancel == nil { // never started
		_ = d.ha.node.Close()
		return
	}
	d.ha.cancel()
	select {
	case <-d.ha.done:
	case <-ctx.Done():
		d.log.Warn().Msg("ha: the etcd side did not stop within the shutdown grace; its lease expires on its own")
		return
	}
	_ = d.ha.node.Close()
}

// haReady is /readyz's word on the node's role: only a leader whose wait is
// over takes clients.
func (d *daemon) haReady() error {
	st := d.srv.HAStatus()
	switch {
	case st.Serving:
		return nil
	case st.Leading:
		return fmt.Errorf("leader of term %d, waiting out the longest lease granted before serving", st.Term)
	}
	leader := d.ha.node.Leader()
	if leader == "" {
		leader = "not known yet"
	}
	return fmt.Errorf("follower: the leader is %s", leader)
}

// haInfo is /api/info's "ha" object.
func (d *daemon) haInfo() *admin.HAInfo {
	st := d.srv.HAStatus()
	role := "follower"
	if st.Leading {
		role = "leader"
	}
	return &admin.HAInfo{Role: role, Serving: st.Serving, Leader: d.ha.node.Leader(), Cluster: d.cfg.haCluster,
		TTLMS: d.cfg.haTTL.Milliseconds(), Terms: st.Terms}
}

// haMetricsStatus is what metrics.RegisterHA reads at each scrape.
func (d *daemon) haMetricsStatus() (leading bool, terms uint64) {
	st := d.srv.HAStatus()
	return st.Leading, st.Terms
}

// haStartFields are the start line's fields of a node: it starts as a
// follower, its lock port closed until it leads.
func (d *daemon) haStartFields() map[string]any {
	return map[string]any{startline.HACluster: d.cfg.haCluster, "ha_name": d.ha.node.Name(), "ha_ttl": d.cfg.haTTL.String(), "ha_etcd": d.cfg.haEtcd, "ha_role": "follower"}
}
