// Package netns makes S9's link: a pair of network namespaces joined by a
// veth pair, made with ip(8) and removed with everything in them.
package netns

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
	ServerAddr = "192.0.2.1" // the server namespace's address
	ClientAddr = "192.0.2.2" // the client namespace's address
	Port       = "7070"      // the port S9's server listens on
)

// Pair is one server namespace and one client namespace, by name.
type Pair struct {
	Server, Client string
	made           []string
}

func runCmd(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// New makes the two namespaces and the link, the run's pair number n;
// on an error it removes what it made. With the process id, n makes the
// names unique on the machine (interface names have at most 15 bytes).
func New(n uint32) (p *Pair, err error) {
	suffix := fmt.Sprintf("%d-%d", os.Getpid()%100000, n)
	p = &Pair{Server: "mlrel-srv-" + suffix, Client: "mlrel-cli-" + suffix}
	defer func() {
		if err != nil {
			_ = p.Remove()
		}
	}()
	for _, ns := range []string{p.Server, p.Client} {
		if err := runCmd("ip", "netns", "add", ns); err != nil {
			return nil, err
		}
		p.made = append(p.made, ns)
		if err := runCmd("ip", "-n", ns, "link", "set", "lo", "up"); err != nil {
			return nil, err
		}
	}
	steps := [][]string{
		{"link", "add", "mlrs" + suffix, "netns", p.Server, "type", "veth", "peer", "name", "mlrc" + suffix, "netns", p.Client},
		{"-n", p.Server, "link", "set", "mlrs" + suffix, "name", "eth0"},
		{"-n", p.Client, "link", "set", "mlrc" + suffix, "name", "eth0"},
		{"-n", p.Server, "addr", "add", ServerAddr + "/24", "dev", "eth0"},
		{"-n", p.Client, "addr", "add", ClientAddr + "/24", "dev", "eth0"},
		{"-n", p.Server, "link", "set", "eth0", "up"},
		{"-n", p.Client, "link", "set", "eth0", "up"},
	}
	for _, s := range steps {
		if err := runCmd("ip", s...); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// DropClientCloses drops every FIN and RST the client namespace sends: the
// loss case, in which the client's close never reaches the server.
func (p *Pair) DropClientCloses() error {
	for _, flag := range []string{"RST", "FIN"} {
		if err := runCmd("ip", "netns", "exec", p.Client, "iptables", "-A", "OUTPUT", "-p", "tcp", "--tcp-flags", flag, flag, "-j", "DROP"); err != nil {
			return err
		}
	}
	return nil
}

// Remove deletes both namespaces, and with them the link and the rules; it
// is safe to call twice.
func (p *Pair) Remove() error {
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
