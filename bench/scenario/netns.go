package scenario

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// S9's link: two network namespaces, the server's and the client's, joined
// by a veth pair, with addresses in 192.0.2.0/24 (TEST-NET-1, never routed):
// nothing outside the namespaces is addressed. New namespaces start with the
// kernel's default sysctls (ephemeral ports 32768–60999, tcp_tw_reuse 2),
// whatever the host has set. Deleting a namespace removes its end of the
// pair, its iptables rules and its sockets.
const (
	netnsServerAddr = "192.0.2.1"
	netnsClientAddr = "192.0.2.2"
	netnsPort       = "7070"
)

// nsPair is one server namespace and one client namespace.
type nsPair struct {
	server, client string
	made           []string
}

func runCmd(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// newNSPair makes the two namespaces and the link, the run's pair number n;
// on an error it removes what it made. With the process id, n makes the
// names unique on the machine (interface names have at most 15 bytes).
func newNSPair(n uint32) (p *nsPair, err error) {
	suffix := fmt.Sprintf("%d-%d", os.Getpid()%100000, n)
	p = &nsPair{server: "mlrel-srv-" + suffix, client: "mlrel-cli-" + suffix}
	defer func() {
		if err != nil {
			_ = p.remove()
		}
	}()
	for _, ns := range []string{p.server, p.client} {
		if err := runCmd("ip", "netns", "add", ns); err != nil {
			return nil, err
		}
		p.made = append(p.made, ns)
		if err := runCmd("ip", "-n", ns, "link", "set", "lo", "up"); err != nil {
			return nil, err
		}
	}
	steps := [][]string{
		{"link", "add", "mlrs" + suffix, "netns", p.server, "type", "veth", "peer", "name", "mlrc" + suffix, "netns", p.client},
		{"-n", p.server, "link", "set", "mlrs" + suffix, "name", "eth0"},
		{"-n", p.client, "link", "set", "mlrc" + suffix, "name", "eth0"},
		{"-n", p.server, "addr", "add", netnsServerAddr + "/24", "dev", "eth0"},
		{"-n", p.client, "addr", "add", netnsClientAddr + "/24", "dev", "eth0"},
		{"-n", p.server, "link", "set", "eth0", "up"},
		{"-n", p.client, "link", "set", "eth0", "up"},
	}
	for _, s := range steps {
		if err := runCmd("ip", s...); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// dropClientCloses drops every FIN and RST the client namespace sends: the
// loss case, in which the client's close never reaches the server.
func (p *nsPair) dropClientCloses() error {
	for _, flag := range []string{"RST", "FIN"} {
		if err := runCmd("ip", "netns", "exec", p.client, "iptables", "-A", "OUTPUT", "-p", "tcp", "--tcp-flags", flag, flag, "-j", "DROP"); err != nil {
			return err
		}
	}
	return nil
}

// remove deletes both namespaces, and with them the link and the rules; it
// is safe to call twice.
func (p *nsPair) remove() error {
	var errs []string
	for _, ns := range p.made {
		if err := runCmd("ip", "netns", "del", ns); err != nil {
			errs = append(errs, err.Error())
		}
	}
	p.made = nil
	if len(errs) > 0 {
		return fmt.Errorf("removing the namespaces: %s", strings.Join(errs, "; "))
	}
	return nil
}
