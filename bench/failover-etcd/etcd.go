package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/monolock/monolock/internal/testsupport/proc"
)

// member is one etcd member in its namespace, Debian's /usr/bin/etcd with
// its defaults but for the addresses (heartbeat 100ms, election 1s).
type member struct {
	name, addr, ns string
	dir            string // data directory and log, kept across restarts
	cluster        string // --initial-cluster
	token          string // --initial-cluster-token, unique to this run
	runs           int
	p              *proc.Process
}

func (m *member) clientURL() string { return "http://" + m.addr + ":2379" }
func (m *member) peerURL() string   { return "http://" + m.addr + ":2380" }

// start runs the member; a restart finds its data directory and rejoins
// (etcd ignores --initial-cluster-state once it has data).
func (m *member) start(bin string) error {
	m.runs++
	p, err := proc.Start(bin, proc.Options{
		Name:  "etcd member " + m.name,
		Netns: m.ns,
		Args: []string{
			"--name", m.name, "--data-dir", filepath.Join(m.dir, "data"),
			"--listen-client-urls", m.clientURL() + ",http://127.0.0.1:2379", "--advertise-client-urls", m.clientURL(),
			"--listen-peer-urls", m.peerURL(), "--initial-advertise-peer-urls", m.peerURL(),
			"--initial-cluster", m.cluster, "--initial-cluster-state", "new", "--initial-cluster-token", m.token,
			"--logger", "zap", "--log-level", "warn",
		},
		LogFile:   filepath.Join(m.dir, fmt.Sprintf("etcd-%d.log", m.runs)),
		StopGrace: 5 * time.Second,
	})
	if err != nil {
		return err
	}
	m.p = p
	return nil
}

func (m *member) alive() bool { return m.p != nil && m.p.Alive() }

// kill ends the member at once (SIGKILL), also a stopped one.
func (m *member) kill() {
	if m.alive() {
		m.p.Kill()
	}
}

func (m *member) signal(sig syscall.Signal) error {
	if !m.alive() {
		return fmt.Errorf("etcd member %s is not running", m.name)
	}
	return m.p.Signal(sig)
}

// healthy reports whether the member answers its /health with true: it is
// part of a cluster with a leader.
func (m *member) healthy() bool {
	code, body := nsGet(m.ns, "http://127.0.0.1:2379/health")
	return code == 200 && strings.Contains(body, `"health":"true"`)
}

// isLeader reports whether the member is the cluster's raft leader, from
// its metrics.
func (m *member) isLeader() bool {
	code, body := nsGet(m.ns, "http://127.0.0.1:2379/metrics")
	return code == 200 && strings.Contains(body, "\netcd_server_is_leader 1")
}

// nsGet fetches url with curl inside namespace ns (the harness itself is
// outside every namespace and reaches no address in them): the status (0
// when there was no answer) and the body.
func nsGet(ns, url string) (int, string) {
	out, err := exec.Command("ip", "netns", "exec", ns, "curl", "-s", "--max-time", "1", "-w", "\n%{http_code}", url).Output()
	if err != nil && len(out) == 0 {
		return 0, ""
	}
	s := string(out)
	i := strings.LastIndexByte(s, '\n')
	var code int
	_, _ = fmt.Sscan(s[i+1:], &code)
	return code, s[:max(i, 0)]
}
