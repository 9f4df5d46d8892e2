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
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/monolock/monolock/bench/internal/failkit"
)

type config struct {
	failkit.Common
	scripts       string
	shutdownDelay time.Duration
	slack         time.Duration
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
	failkit.ClientsMain("failover", net.JoinHostPort(vip, protoPort))
	os.Exit(run(os.Args[1:], os.Stdout))
}

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("failover", flag.ContinueOnError)
	c.Register(fs, 2*time.Second)
	fs.StringVar(&c.scripts, "scripts", filepath.Join("..", "deploy", "keepalived"), "the keepalived files under test")
	fs.DurationVar(&c.shutdownDelay, "shutdown-delay", 3*time.Second, "both servers' -shutdown-delay (deploy/monolock.service's value)")
	fs.DurationVar(&c.slack, "slack", 100*time.Millisecond, "scheduling allowance for a holder's stop (client and servers share one clock)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if err := c.Check(); err != nil {
		return c, err
	}
	var err error
	c.scripts, err = filepath.Abs(c.scripts)
	return c, err
}

// preflight says what is missing before anything is made.
func preflight(c config) error {
	if err := c.Preflight("network namespaces, keepalived", failkit.Tool{Name: "keepalived", Install: "make failover-deps (apt-get install -y keepalived)"}); err != nil {
		return err
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
	h := &harness{}
	return failkit.Main("failover", stdout, func() (keep bool, err error) {
		if h.cfg, err = parseFlags(args); err == nil {
			err = preflight(h.cfg)
		}
		return h.cfg.Keep, err
	}, func() (int, int, error) { return h.rounds(stdout) }, h.cleanup)
}

// rounds sets the hosts up and runs every round, printing a line for each
// and the table at the end; it returns how many rounds ran and their
// violations.
func (h *harness) rounds(stdout io.Writer) (int, int, error) {
	var err error
	if h.self, err = os.Executable(); err != nil {
		return 0, 0, err
	}
	if h.dir, err = os.MkdirTemp("", "monolock-failover-"); err != nil {
		return 0, 0, err
	}
	shipped, err := os.ReadFile(filepath.Join(h.cfg.scripts, "keepalived.conf"))
	if err != nil {
		return 0, 0, err
	}
	if h.net, err = failkit.BuildLAN("mlfo", []failkit.Host{{Name: "a", Addr: addrA}, {Name: "b", Addr: addrB}, {Name: "client", Addr: addrClient}}); err != nil {
		return 0, 0, err
	}
	fmt.Fprintf(stdout, "failover: namespaces mlfo-*-%s, files in %s\n", h.net.Suffix, h.dir)
	for _, name := range []string{"a", "b"} {
		host, err := newServerHost(name, h.net.NS(name), h.dir, h.cfg.scripts)
		if err != nil {
			return 0, 0, err
		}
		h.hosts = append(h.hosts, host)
		if err := host.startMonolock(h.cfg.Server, h.cfg.shutdownDelay); err != nil {
			return 0, 0, err
		}
		if err := host.startKeepalived(string(shipped)); err != nil {
			return 0, 0, err
		}
	}
	if err := h.await(60*time.Second, "one MASTER and one BACKUP", func() bool {
		_, _, err := h.roles()
		states := h.hosts[0].vrrpState() + "/" + h.hosts[1].vrrpState()
		return err == nil && (states == "MASTER/BACKUP" || states == "BACKUP/MASTER")
	}); err != nil {
		return 0, 0, err
	}
	fmt.Fprintf(stdout, "failover: %d clients, %d locks, lease %v, -shutdown-delay %v, %d rounds of each fault\n",
		h.cfg.Clients, h.cfg.Locks, h.cfg.Lease, h.cfg.shutdownDelay, h.cfg.Rounds)
	fmt.Fprintln(stdout, "failover: both servers run on this machine and read the same clock (no skew between them)")
	return failkit.Rounds(stdout, faults, h.cfg.Rounds, func(f string) string { return f }, h.round,
		func(r row) (string, []string) {
			return fmt.Sprintf("D %v, all back %v, late holders %d, tokens %s, stale rejected %d, double grants %d, fenced %s",
				r.D.Round(time.Millisecond), r.Readmit.Round(time.Millisecond), r.LateHolders, okWord(r.TokenOrder),
				r.StaleRejected, r.DoubleGrants, fencedWord(r)), r.violationReason
		}, func(rows []row) string { return summarize(rows, h.cfg) }, h.cfg.Results)
}

// cleanup stops every process and removes the namespaces, and the files
// unless keep.
func (h *harness) cleanup(keep bool) {
	h.cleanOnce.Do(func() {
		for _, host := range h.hosts {
			host.stopKeepalived()
			host.stopMonolock()
		}
		failkit.Remove("failover", h.clientRun, h.net, h.dir, keep)
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
		c.Clients, c.Locks, c.Lease, c.Lease*8/10, c.shutdownDelay)
	return b.String()
}
