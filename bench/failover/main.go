// Command failover runs monolock's active–passive pair for real (`make
// failover`): two server hosts and a client host in network namespaces on a
// bridge (addresses from 192.0.2.0/24 only), each server host running
// bin/monolock and Debian's keepalived with deploy/keepalived/keepalived.conf
// rendered only for its interface names and addresses, and the shipped check
// and notify scripts. Clients on the client host dial the virtual address and
// write to a resource that rejects stale fencing tokens.
//
// Each fault is injected into the current primary several times: SIGKILL of
// its monolock; its host cut off (link down) while monolock runs; SIGSTOP of
// its monolock and SIGCONT once the address has moved; a clean SIGTERM with
// -shutdown-delay. Every round measures D (fault to the standby's first
// grant), the time until every client holds or queues again, holders of the
// old primary that did not stop within 0.8 × lease of its last possible
// confirmation, the order of tokens across the two servers, stale writes the
// resource rejected, double grants the resource saw, and whether the old
// primary was fenced. The old primary is then brought back as the standby
// and the next round fails over the other way.
//
// Both servers run on this machine and read the same clock, so the token
// order measured here is the one of perfectly synchronised clocks; a standby
// whose clock is behind is covered by TestStandbyClockBehind instead.
//
// It needs root, iproute2 and keepalived (make failover-deps). Everything it
// creates (namespaces, processes, files) is removed on exit, also on a
// failure and on SIGINT. Exit status: 0 without violations, 1 with, 2 when
// the harness itself failed.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
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

type config struct {
	server        string
	scripts       string
	rounds        int
	clients       int
	locks         int
	lease         time.Duration
	shutdownDelay time.Duration
	slack         time.Duration
	results       string
	keep          bool
}

type harness struct {
	cfg       config
	self      string // this executable, run again as the client process
	dir       string
	net       *failkit.LAN
	hosts     []*serverHost
	clientRun *failkit.ClientRun

	cleanOnce sync.Once
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == failkit.ClientsCommand {
		if err := failkit.RunClients(os.Args[2:], net.JoinHostPort(vip, protoPort)); err != nil {
			fmt.Fprintln(os.Stderr, "failover clients:", err)
			os.Exit(2)
		}
		return
	}
	os.Exit(run(os.Args[1:], os.Stdout))
}

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("failover", flag.ContinueOnError)
	fs.StringVar(&c.server, "server", filepath.Join("..", "bin", "monolock"), "server binary (make build's output, seen from bench/)")
	fs.StringVar(&c.scripts, "scripts", filepath.Join("..", "deploy", "keepalived"), "the keepalived files under test")
	fs.IntVar(&c.rounds, "rounds", 5, "rounds of each fault")
	fs.IntVar(&c.clients, "clients", 30, "clients on the client host")
	fs.IntVar(&c.locks, "locks", 6, "lock names they share")
	fs.DurationVar(&c.lease, "lease", 2*time.Second, "the clients' lease")
	fs.DurationVar(&c.shutdownDelay, "shutdown-delay", 3*time.Second, "both servers' -shutdown-delay (deploy/monolock.service's value)")
	fs.DurationVar(&c.slack, "slack", 100*time.Millisecond, "scheduling allowance for a holder's stop (client and servers share one clock)")
	fs.StringVar(&c.results, "results", "", "also write the table as Markdown to this file")
	fs.BoolVar(&c.keep, "keep", false, "keep the logs (always kept when there are violations)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.rounds < 1 || c.clients < 1 || c.locks < 1 || c.lease < 100*time.Millisecond {
		return c, errors.New("want -rounds, -clients, -locks >= 1 and -lease >= 100ms")
	}
	var err error
	if c.server, err = filepath.Abs(c.server); err != nil {
		return c, err
	}
	c.scripts, err = filepath.Abs(c.scripts)
	return c, err
}

// preflight says what is missing before anything is made.
func preflight(c config) error {
	if os.Geteuid() != 0 {
		return errors.New("needs root (network namespaces, keepalived): run it as root, as .ci/run does")
	}
	for _, tool := range []struct{ name, install string }{
		{"ip", "apt-get install -y iproute2"}, {"keepalived", "make failover-deps (apt-get install -y keepalived)"},
		{"curl", "apt-get install -y curl"},
	} {
		if _, err := exec.LookPath(tool.name); err != nil {
			return fmt.Errorf("%s is not on PATH: %s", tool.name, tool.install)
		}
	}
	if _, err := os.Stat(c.server); err != nil {
		return fmt.Errorf("server binary: %w; run make build first", err)
	}
	return scriptsSecure(c.scripts)
}

// scriptsSecure checks what keepalived's enable_script_security demands of
// the scripts it runs as root: they and every directory above them belong to
// root and only root may write them. Otherwise keepalived quietly refuses to
// run them and no host ever becomes MASTER.
func scriptsSecure(dir string) error {
	for _, p := range []string{filepath.Join(dir, "check_monolock.sh"), filepath.Join(dir, "notify_monolock.sh")} {
		for q := p; ; q = filepath.Dir(q) {
			st, err := os.Stat(q)
			if err != nil {
				return err
			}
			sys, ok := st.Sys().(*syscall.Stat_t)
			if ok && (sys.Uid != 0 || st.Mode().Perm()&0o022 != 0 && st.Mode()&os.ModeSticky == 0) {
				return fmt.Errorf("%s is not owned by root or is writable by others (%v): keepalived's script security would refuse %s; chown root and chmod go-w it", q, st.Mode(), p)
			}
			if q == "/" {
				break
			}
		}
	}
	return nil
}

func run(args []string, stdout io.Writer) int {
	cfg, err := parseFlags(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "failover:", err)
		return 2
	}
	if err := preflight(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "failover:", err)
		return 2
	}
	h := &harness{cfg: cfg}
	defer h.cleanup(true) // also on a panic; a no-op after the cleanup below
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		fmt.Fprintf(os.Stderr, "failover: %v: removing the namespaces and processes\n", sig)
		h.cleanup(true)
		os.Exit(2)
	}()
	rows, err := h.runAll(stdout)
	violations := 0
	for _, r := range rows {
		violations += len(r.violationReason)
	}
	h.cleanup(cfg.keep || violations > 0 || err != nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "failover:", err)
		return 2
	}
	fmt.Fprintf(stdout, "failover: %d rounds, %d violations\n", len(rows), violations)
	if violations > 0 {
		return 1
	}
	return 0
}

func (h *harness) runAll(stdout io.Writer) ([]row, error) {
	var err error
	if h.self, err = os.Executable(); err != nil {
		return nil, err
	}
	if h.dir, err = os.MkdirTemp("", "monolock-failover-"); err != nil {
		return nil, err
	}
	shipped, err := os.ReadFile(filepath.Join(h.cfg.scripts, "keepalived.conf"))
	if err != nil {
		return nil, err
	}
	if h.net, err = failkit.BuildLAN("mlfo", []failkit.Host{{Name: "a", Addr: addrA}, {Name: "b", Addr: addrB}, {Name: "client", Addr: addrClient}}); err != nil {
		return nil, err
	}
	fmt.Fprintf(stdout, "failover: namespaces mlfo-*-%s, files in %s\n", h.net.Suffix, h.dir)
	for _, name := range []string{"a", "b"} {
		host, err := newServerHost(name, h.net.NS(name), h.dir, h.cfg.scripts)
		if err != nil {
			return nil, err
		}
		h.hosts = append(h.hosts, host)
		if err := host.startMonolock(h.cfg.server, h.cfg.shutdownDelay); err != nil {
			return nil, err
		}
		if err := host.startKeepalived(string(shipped)); err != nil {
			return nil, err
		}
	}
	if err := h.await(60*time.Second, "one MASTER and one BACKUP", func() bool {
		_, _, err := h.roles()
		states := h.hosts[0].vrrpState() + "/" + h.hosts[1].vrrpState()
		return err == nil && (states == "MASTER/BACKUP" || states == "BACKUP/MASTER")
	}); err != nil {
		return nil, err
	}
	fmt.Fprintf(stdout, "failover: %d clients, %d locks, lease %v, -shutdown-delay %v, %d rounds of each fault\n",
		h.cfg.clients, h.cfg.locks, h.cfg.lease, h.cfg.shutdownDelay, h.cfg.rounds)
	fmt.Fprintln(stdout, "failover: both servers run on this machine and read the same clock (no skew between them)")
	var rows []row
	for _, fault := range faults {
		for i := range h.cfg.rounds {
			r, err := h.round(fault)
			if err != nil {
				return rows, fmt.Errorf("%s, round %d: %w", fault, i+1, err)
			}
			rows = append(rows, r)
			fmt.Fprintf(stdout, "  %-58s round %d: D %v, all back %v, late holders %d, tokens %s, stale rejected %d, double grants %d, fenced %s\n",
				fault, i+1, r.D.Round(time.Millisecond), r.Readmit.Round(time.Millisecond), r.LateHolders, okWord(r.TokenOrder),
				r.StaleRejected, r.DoubleGrants, fencedWord(r))
			for _, v := range r.violationReason {
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
		for _, host := range h.hosts {
			host.stopKeepalived()
			host.stopMonolock()
		}
		if h.net != nil {
			for _, err := range h.net.Teardown() {
				fmt.Fprintln(os.Stderr, "failover: cleanup:", err)
			}
		}
		if h.dir == "" {
			return
		}
		if keep {
			fmt.Fprintf(os.Stderr, "failover: logs kept in %s\n", h.dir)
			return
		}
		_ = os.RemoveAll(h.dir)
	})
}

func okWord(ok bool) string {
	if ok {
		return "ordered"
	}
	return "NOT ORDERED"
}

func fencedWord(r row) string {
	if r.Fenced {
		return fmt.Sprintf("yes (+%v)", r.FencedAfter.Round(time.Millisecond))
	}
	return "NO"
}

// summarize is the table of the run, one row per fault, in Markdown.
func summarize(rows []row, c config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| fault | rounds | D: fault to the standby's first grant (median, max) | all clients holding or queued again (median, max) | holders not stopped by 0.8 × lease | standby's first token above the old primary's | stale writes rejected | double grants at the resource | old primary fenced |\n")
	fmt.Fprintf(&b, "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, f := range faults {
		var ds, rs []time.Duration
		late, stale, double, ordered, fenced, n := 0, 0, 0, 0, 0, 0
		for _, r := range rows {
			if r.Fault != f {
				continue
			}
			n++
			ds, rs = append(ds, r.D), append(rs, r.Readmit)
			late += r.LateHolders
			stale += r.StaleRejected
			double += r.DoubleGrants
			if r.TokenOrder {
				ordered++
			}
			if r.Fenced {
				fenced++
			}
		}
		if n == 0 {
			continue
		}
		fmt.Fprintf(&b, "| %s | %d | %s, %s | %s, %s | %d | %d of %d | %d | %d | %d of %d |\n", f, n,
			failkit.Seconds(failkit.Median(ds)), failkit.Seconds(failkit.MaxOf(ds)), failkit.Seconds(failkit.Median(rs)), failkit.Seconds(failkit.MaxOf(rs)), late, ordered, n, stale, double, fenced, n)
	}
	fmt.Fprintf(&b, "\n%d clients over %d locks, lease %v (holders must stop by 0.8 × lease = %v), both servers with -shutdown-delay %v; both servers share this machine's clock.\n",
		c.clients, c.locks, c.lease, c.lease*8/10, c.shutdownDelay)
	return b.String()
}
