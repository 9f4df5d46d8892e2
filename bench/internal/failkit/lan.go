package failkit

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os/exec"
	"strings"
)

// Iface is the interface name inside every host namespace; PrefixLen the
// LAN's prefix. Every address of a LAN is in 192.0.2.0/24 (TEST-NET-1,
// never routed): nothing outside the namespaces is ever addressed.
const (
	Iface     = "eth0"
	PrefixLen = "/24"
)

// Host is one member of a LAN.
type Host struct{ Name, Addr string }

// LAN is a switch namespace holding a bridge, and one namespace per host
// joined to it by a veth pair. Deleting the namespaces removes every
// interface, socket and iptables rule in them.
type LAN struct {
	Suffix string
	sw     string            // the switch namespace
	ns     map[string]string // host name -> namespace
	made   []string          // namespaces created, for Teardown
}

// randomSuffix makes the namespace names unique to this run, so that two
// runs (or a run and a leftover of a killed one) never collide.
func randomSuffix() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Run runs a command and returns its combined output in the error.
func Run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func ipCmd(args ...string) error { return Run("ip", args...) }

// BuildLAN makes the switch and the hosts, named prefix-HOST-SUFFIX (prefix
// at most 4 bytes: interface names have at most 15). On an error it removes
// what it made.
func BuildLAN(prefix string, hosts []Host) (n *LAN, err error) {
	n = &LAN{Suffix: randomSuffix(), ns: map[string]string{}}
	defer func() {
		if err != nil {
			n.Teardown()
		}
	}()
	n.sw = prefix + "-sw-" + n.Suffix
	if err := n.addNS(n.sw); err != nil {
		return nil, err
	}
	if err := ipCmd("-n", n.sw, "link", "add", "br0", "type", "bridge"); err != nil {
		return nil, err
	}
	if err := ipCmd("-n", n.sw, "link", "set", "br0", "up"); err != nil {
		return nil, err
	}
	for i, h := range hosts {
		ns := prefix + "-" + h.Name + "-" + n.Suffix
		if err := n.addNS(ns); err != nil {
			return nil, err
		}
		n.ns[h.Name] = ns
		port := fmt.Sprintf("p%d", i)
		tmp := fmt.Sprintf("%s%s%d", prefix, n.Suffix, i) // unique while still in this namespace
		steps := [][]string{
			{"link", "add", tmp, "netns", ns, "type", "veth", "peer", "name", port, "netns", n.sw},
			{"-n", ns, "link", "set", tmp, "name", Iface},
			{"-n", n.sw, "link", "set", port, "master", "br0"},
			{"-n", n.sw, "link", "set", port, "up"},
			{"-n", ns, "addr", "add", h.Addr + PrefixLen, "dev", Iface},
			{"-n", ns, "link", "set", Iface, "up"},
		}
		for _, s := range steps {
			if err := ipCmd(s...); err != nil {
				return nil, err
			}
		}
	}
	return n, nil
}

func (n *LAN) addNS(name string) error {
	if err := ipCmd("netns", "add", name); err != nil {
		return err
	}
	n.made = append(n.made, name)
	return ipCmd("-n", name, "link", "set", "lo", "up")
}

// NS is the namespace of a host.
func (n *LAN) NS(host string) string { return n.ns[host] }

// Teardown deletes every namespace this run made; it is safe to call twice.
func (n *LAN) Teardown() []error {
	var errs []error
	for _, ns := range n.made {
		if err := ipCmd("netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	n.made = nil
	return errs
}

// SetLink brings a host's interface up or down: a host cut off.
func (n *LAN) SetLink(host string, up bool) error {
	state := "down"
	if up {
		state = "up"
	}
	return ipCmd("-n", n.ns[host], "link", "set", Iface, state)
}

// HasAddr reports whether host holds addr (a moving virtual address).
func (n *LAN) HasAddr(host, addr string) bool {
	out, err := exec.Command("ip", "-n", n.ns[host], "-4", "-o", "addr", "show", "dev", Iface).Output()
	return err == nil && strings.Contains(string(out), " "+addr+"/")
}
