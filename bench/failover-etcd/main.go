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
// test-only clock offset) and then the leader killed, the next leader's
// clock an hour behind too. Every round checks: no two holders of a lock at
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
	"os/exec"
	"os/signal"
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
	server  string
	etcd    string
	nodes   int
	rounds  int
	clients int
	locks   int
	lease   time.Duration
	ttl     time.Duration
	outage  time.Duration
	only    string
	results string
	keep    bool
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
	if len(os.Args) > 1 && os.Args[1] == failkit.ClientsCommand {
		if err := failkit.RunClients(os.Args[2:], nodeNet+"1:7070"); err != nil {
			fmt.Fprintln(os.Stderr, "failover-etcd clients:", err)
			os.Exit(2)
		}
		return
	}
	os.Exit(run(os.Args[1:], os.Stdout))
}

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("failover-etcd", flag.ContinueOnError)
	fs.StringVar(&c.server, "server", filepath.Join("..", "bin", "monolock"), "server binary (make build's output, seen from bench/)")
	fs.StringVar(&c.etcd, "etcd", "/usr/bin/etcd", "the etcd server (Debian's etcd-server)")
	fs.IntVar(&c.nodes, "nodes", 2, "monolock nodes (2 or 3)")
	fs.IntVar(&c.rounds, "rounds", 5, "rounds of each fault")
	fs.IntVar(&c.clients, "clients", 30, "clients on the client host")
	fs.IntVar(&c.locks, "locks", 6, "lock names they share")
	fs.DurationVar(&c.lease, "lease", time.Second, "the clients' lease (the new leader's wait)")
	fs.DurationVar(&c.ttl, "ttl", 3*time.Second, "the nodes' -ha-ttl (whole seconds, at least 2s)")
	fs.DurationVar(&c.outage, "outage", 0, "how long a partition or a lost quorum lasts before it is repaired (0: 2 × ttl)")
	fs.StringVar(&c.only, "fault", "", "run only the faults whose name contains this")
	fs.StringVar(&c.results, "results", "", "also write the table as Markdown to this file")
	fs.BoolVar(&c.keep, "keep", false, "keep the logs (always kept when there are violations)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case c.rounds < 1 || c.clients < 1 || c.locks < 1:
		return c, errors.New("want -rounds, -clients, -locks >= 1")
	case c.nodes < 2 || c.nodes > 3:
		return c, errors.New("want -nodes 2 or 3")
	case c.lease < 100*time.Millisecond:
		return c, errors.New("want -lease >= 100ms")
	case c.ttl < 2*time.Second || c.ttl%time.Second != 0:
		return c, errors.New("want -ttl in whole seconds, at least 2s (etcd's lease unit; the server's minimum)")
	}
	if c.outage == 0 {
		c.outage = 2 * c.ttl
	}
	var err error
	c.server, err = filepath.Abs(c.server)
	return c, err
}

// preflight says what is missing before anything is made.
func preflight(c config) error {
	if os.Geteuid() != 0 {
		return errors.New("needs root (network namespaces, iptables): run it as root, as .ci/run does")
	}
	for _, tool := range []struct{ name, install string }{
		{"ip", "apt-get install -y iproute2"}, {"iptables", "apt-get install -y iptables"},
		{"curl", "apt-get install -y curl"}, {c.etcd, "make failover-etcd-deps (apt-get install -y etcd-server)"},
	} {
		if _, err := exec.LookPath(tool.name); err != nil {
			return fmt.Errorf("%s is not on PATH: %s", tool.name, tool.install)
		}
	}
	if _, err := os.Stat(c.server); err != nil {
		return fmt.Errorf("server binary: %w; run make build first", err)
	}
	return nil
}

func run(args []string, stdout io.Writer) int {
	cfg, err := parseFlags(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "failover-etcd:", err)
		return 2
	}
	if err := preflight(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "failover-etcd:", err)
		return 2
	}
	h := &harness{cfg: cfg}
	defer h.cleanup(true) // also on a panic; a no-op after the cleanup below
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		fmt.Fprintf(os.Stderr, "failover-etcd: %v: removing the namespaces and processes\n", sig)
		h.cleanup(true)
		os.Exit(2)
	}()
	started := time.Now()
	rows, err := h.runAll(stdout)
	violations := 0
	for _, r := range rows {
		violations += len(r.violations)
	}
	h.cleanup(cfg.keep || violations > 0 || err != nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "failover-etcd:", err)
		return 2
	}
	fmt.Fprintf(stdout, "failover-etcd: %d rounds in %v, %d violations\n", len(rows), time.Since(started).Round(time.Second), violations)
	if violations > 0 {
		return 1
	}
	return 0
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
		if err := n.start(h.cfg.server, h.cfg, h.endpoints()); err != nil {
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

func (h *harness) runAll(stdout io.Writer) ([]row, error) {
	if err := h.setUp(stdout); err != nil {
		return nil, err
	}
	fmt.Fprintf(stdout, "failover-etcd: 3 etcd members, %d nodes (-ha-ttl %v), %d clients, %d locks, lease %v, outages %v, %d rounds of each fault\n",
		len(h.nodes), h.cfg.ttl, h.cfg.clients, h.cfg.locks, h.cfg.lease, h.cfg.outage, h.cfg.rounds)
	var rows []row
	for _, fault := range faults {
		if !strings.Contains(fault.name, h.cfg.only) {
			continue
		}
		for i := range h.cfg.rounds {
			r, err := h.round(fault)
			if err != nil {
				return rows, fmt.Errorf("%s, round %d: %w", fault.name, i+1, err)
			}
			rows = append(rows, r)
			fmt.Fprintf(stdout, "  %-62s round %d: %s\n", fault.name, i+1, r)
			for _, v := range r.violations {
				fmt.Fprintln(stdout, "    VIOLATION:", v)
			}
		}
	}
	table := summarize(rows, h.cfg)
	fmt.Fprintln(stdout)
	fmt.Fprint(stdout, table)
	if h.cfg.results != "" {
		if err := os.WriteFile(h.cfg.results, []byte(table), 0o644); err != nil {
			return rows, err
		}
	}
	return rows, nil
}

// cleanup stops every process and removes the namespaces, and the files
// unless keep.
func (h *harness) cleanup(keep bool) {
	h.cleanOnce.Do(func() {
		if cr := h.clientRun; cr != nil {
			_, _ = cr.Stop()
		}
		for _, n := range h.nodes {
			n.kill()
		}
		for _, m := range h.members {
			_ = m.signal(syscall.SIGCONT)
			m.kill()
		}
		if h.net != nil {
			for _, err := range h.net.Teardown() {
				fmt.Fprintln(os.Stderr, "failover-etcd: cleanup:", err)
			}
		}
		if h.dir == "" {
			return
		}
		if keep {
			fmt.Fprintf(os.Stderr, "failover-etcd: logs kept in %s\n", h.dir)
			return
		}
		_ = os.RemoveAll(h.dir)
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
