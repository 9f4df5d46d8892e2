// Command failover-etcd runs monolock's etcd-elected nodes for real (`make
// failover-etcd`): a three-member etcd cluster (Debian's /usr/bin/etcd), two
// (or three) monolock nodes started with -ha-etcd, and a client host, each in
// a network namespace of its own on one bridge (addresses from 192.0.2.0/24
// only). The clients are given every node's address; only the leader has a
// lock listener, so a follower refuses and the client moves on at once. They
// write to a resource that rejects stale fencing tokens.
//
// Each fault is injected several times (-rounds): SIGKILL of the leader;
// SIGSTOP of the leader and SIGCONT after another node took over; the leader
// cut off from etcd but not from its clients (iptables in its namespace);
// the clients cut off from the leader (while etcd still sees it); the etcd
// raft leader member killed; etcd's quorum lost (two members killed) and
// restored; the leader's wall clock stepped back an hour (the server's
// test-only clock offset, which with -ha-etcd moves the one wall-clock
// reading a node makes: the clock rule of a term's first token block) and
// then the leader killed, the next leader's clock an hour behind too. Every round checks: no two holders of a lock at
// once (by the client process's one clock), every server run's tokens
// strictly increasing in its audit log, the first grant of a new term above
// every token any other run ever granted and no other run granting after
// it, no stale write landed at the fenced resource; and measures D, from the
// fault (or the repair, when nothing may grant until it) to the first grant
// of the term that serves next.
//
// It needs root, iproute2, iptables, curl and etcd-server (make
// failover-etcd-deps). Everything it creates (namespaces, processes, files)
// is removed on exit, also on a failure and on SIGINT. Exit status: 0
// without violations, 1 with, 2 when the harness itself failed.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/monolock/monolock/bench/internal/failkit"
)

// Addresses, all in 192.0.2.0/24 (TEST-NET-1, never routed).
const (
	addrClient = "192.0.2.20"
	nodeNet    = "192.0.2.1" // node i is 192.0.2.1i
	memberNet  = "192.0.2.3" // member i is 192.0.2.3i
	nsPrefix   = "mlfe"      // namespaces mlfe-HOST-SUFFIX
	clusterKey = "failover"  // -ha-cluster
)

type config struct {
	failkit.Common
	etcd   string
	nodes  int
	ttl    time.Duration
	outage time.Duration
	only   string
}

type harness struct {
	cfg       config
	self      string // this executable, run again as the client process
	dir       string
	net       *failkit.LAN
	members   []*member
	nodes     []*node
	clientRun *failkit.ClientRun

	cleanOnce sync.Once
}

func main() {
	failkit.ClientsMain("failover-etcd", nodeNet+"1:7070")
	os.Exit(run(os.Args[1:], os.Stdout))
}

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("failover-etcd", flag.ContinueOnError)
	c.Register(fs, time.Second)
	fs.StringVar(&c.etcd, "etcd", "/usr/bin/etcd", "the etcd server (Debian's etcd-server)")
	fs.IntVar(&c.nodes, "nodes", 2, "monolock nodes (2 or 3)")
	fs.DurationVar(&c.ttl, "ttl", 3*time.Second, "the nodes' -ha-ttl (whole seconds, at least 2s)")
	fs.DurationVar(&c.outage, "outage", 0, "how long a partition or a lost quorum lasts before it is repaired (0: 2 × ttl)")
	fs.StringVar(&c.only, "fault", "", "run only the faults whose name contains this")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case c.nodes < 2 || c.nodes > 3:
		return c, errors.New("want -nodes 2 or 3")
	case c.ttl < 2*time.Second || c.ttl%time.Second != 0:
		return c, errors.New("want -ttl in whole seconds, at least 2s (etcd's lease unit; the server's minimum)")
	}
	if c.outage == 0 {
		c.outage = 2 * c.ttl
	}
	return c, c.Check()
}

// preflight says what is missing before anything is made.
func preflight(c config) error {
	return c.Preflight("network namespaces, iptables", failkit.Tool{Name: "iptables", Install: "apt-get install -y iptables"},
		failkit.Tool{Name: c.etcd, Install: "make failover-etcd-deps (apt-get install -y etcd-server)"})
}

func run(args []string, stdout io.Writer) int {
	h := &harness{}
	return failkit.Main("failover-etcd", stdout, func() (keep bool, err error) {
		if h.cfg, err = parseFlags(args); err == nil {
			err = preflight(h.cfg)
		}
		return h.cfg.Keep, err
	}, func() (int, int, error) { return h.rounds(stdout) }, h.cleanup)
}

// setUp makes the LAN, starts the etcd cluster and the nodes, and waits for
// a leader.
func (h *harness) setUp(stdout io.Writer) error {
	var err error
	if h.self, err = os.Executable(); err != nil {
		return err
	}
	if h.dir, err = os.MkdirTemp("", "monolock-failover-etcd-"); err != nil {
		return err
	}
	hosts := []failkit.Host{{Name: "client", Addr: addrClient}}
	for i := 1; i <= 3; i++ {
		hosts = append(hosts, failkit.Host{Name: fmt.Sprintf("e%d", i), Addr: fmt.Sprintf("%s%d", memberNet, i)})
	}
	for i := 1; i <= h.cfg.nodes; i++ {
		hosts = append(hosts, failkit.Host{Name: fmt.Sprintf("n%d", i), Addr: fmt.Sprintf("%s%d", nodeNet, i)})
	}
	if h.net, err = failkit.BuildLAN(nsPrefix, hosts); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "failover-etcd: namespaces %s-*-%s, files in %s\n", nsPrefix, h.net.Suffix, h.dir)
	var initial []string
	for _, host := range hosts {
		if !strings.HasPrefix(host.Name, "e") {
			continue
		}
		m := &member{name: host.Name, addr: host.Addr, ns: h.net.NS(host.Name), dir: filepath.Join(h.dir, host.Name), token: "monolock-" + h.net.Suffix}
		h.members = append(h.members, m)
		initial = append(initial, m.name+"="+m.peerURL())
	}
	for _, m := range h.members {
		m.cluster = strings.Join(initial, ",")
		if err := os.MkdirAll(m.dir, 0o700); err != nil {
			return err
		}
		if err := m.start(h.cfg.etcd); err != nil {
			return err
		}
	}
	if err := h.awaitEtcd(); err != nil {
		return err
	}
	for _, host := range hosts {
		if !strings.HasPrefix(host.Name, "n") {
			continue
		}
		n := &node{name: host.Name, addr: host.Addr, ns: h.net.NS(host.Name), dir: filepath.Join(h.dir, host.Name)}
		if err := os.MkdirAll(n.dir, 0o700); err != nil {
			return err
		}
		h.nodes = append(h.nodes, n)
		if err := n.start(h.cfg.Server, h.cfg, h.endpoints()); err != nil {
			return err
		}
	}
	_, err = h.awaitLeader()
	return err
}

func (h *harness) endpoints() string {
	var out []string
	for _, m := range h.members {
		out = append(out, m.clientURL())
	}
	return strings.Join(out, ",")
}

func (h *harness) clientAddrs() string {
	var out []string
	for _, n := range h.nodes {
		out = append(out, n.protoAddr())
	}
	return strings.Join(out, ",")
}

// rounds sets the hosts up and runs every round, printing a line for each
// and the table at the end; it returns how many rounds ran and their
// violations.
func (h *harness) rounds(stdout io.Writer) (int, int, error) {
	if err := h.setUp(stdout); err != nil {
		return 0, 0, err
	}
	fmt.Fprintf(stdout, "failover-etcd: 3 etcd members, %d nodes (-ha-ttl %v), %d clients, %d locks, lease %v, outages %v, %d rounds of each fault\n",
		len(h.nodes), h.cfg.ttl, h.cfg.Clients, h.cfg.Locks, h.cfg.Lease, h.cfg.outage, h.cfg.Rounds)
	var chosen []fault
	for _, f := range faults {
		if strings.Contains(f.name, h.cfg.only) {
			chosen = append(chosen, f)
		}
	}
	return failkit.Rounds(stdout, chosen, h.cfg.Rounds, func(f fault) string { return f.name }, h.round,
		func(r row) (string, []string) { return r.String(), r.violations },
		func(rows []row) string { return summarize(rows, h.cfg) }, h.cfg.Results)
}

// cleanup kills the nodes and the etcd members (thawed first), then stops
// the clients and removes the namespaces, and the files unless keep.
func (h *harness) cleanup(keep bool) {
	h.cleanOnce.Do(func() {
		for _, n := range h.nodes {
			n.kill()
		}
		for _, m := range h.members {
			_ = m.signal(syscall.SIGCONT)
			m.kill()
		}
		failkit.Remove("failover-etcd", h.clientRun, h.net, h.dir, keep)
	})
}

// awaitEtcd waits until every member is running and healthy.
func (h *harness) awaitEtcd() error {
	return failkit.Await(60*time.Second, "every etcd member healthy", func() bool {
		for _, m := range h.members {
			if !m.alive() || !m.healthy() {
				return false
			}
		}
		return true
	})
}

// awaitLeader waits until exactly one node answers /readyz 200 and returns
// it.
func (h *harness) awaitLeader() (*node, error) {
	var leader *node
	err := failkit.Await(60*time.Second, "exactly one node leading (/readyz 200)", func() bool {
		leader = nil
		for _, n := range h.nodes {
			if n.role() == "leader" {
				if leader != nil {
					return false
				}
				leader = n
			}
		}
		return leader != nil
	})
	return leader, err
}
