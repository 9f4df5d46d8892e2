package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os/exec"
	"strings"
)

// The addresses of the pair are those of deploy/keepalived/keepalived.conf,
// all in 192.0.2.0/24 (TEST-NET-1, never routed): nothing outside the
// namespaces is ever addressed.
const (
	addrA      = "192.0.2.11"
	addrB      = "192.0.2.12"
	addrClient = "192.0.2.20"
	vip        = "192.0.2.70"
	protoPort  = "7070"
	prefixLen  = "/24"
	// hostIface is the interface name inside every host namespace; it is
	// the one the shipped keepalived.conf names.
	hostIface = "eth0"
)

// network is a small LAN of network namespaces: a switch namespace holding a
// bridge, and one namespace per host joined to it by a veth pair. Deleting
// the namespaces removes every interface in them.
type network struct {
	suffix string
	sw     string            // the switch namespace
	hosts  map[string]string // host name -> namespace
	made   []string          // namespaces created, for teardown
}

// randomSuffix makes the namespace names unique to this run, so that two
// runs (or a run and a leftover of a killed one) never collide.
func randomSuffix() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// buildNetwork makes the switch and the hosts a, b and client. On an error
// it removes what it made.
func buildNetwork() (n *network, err error) {
	n = &network{suffix: randomSuffix(), hosts: map[string]string{}}
	defer func() {
		if err != nil {
			n.teardown()
		}
	}()
	n.sw = "mlfo-sw-" + n.suffix
	if err := n.addNS(n.sw); err != nil {
		return nil, err
	}
	if err := ipCmd("-n", n.sw, "link", "add", "br0", "type", "bridge"); err != nil {
		return nil, err
	}
	if err := ipCmd("-n", n.sw, "link", "set", "br0", "up"); err != nil {
		return nil, err
	}
	for i, h := range []struct{ name, addr string }{{"a", addrA}, {"b", addrB}, {"client", addrClient}} {
		ns := "mlfo-" + h.name + "-" + n.suffix
		if err := n.addNS(ns); err != nil {
			return nil, err
		}
		n.hosts[h.name] = ns
		port := fmt.Sprintf("p%d", i)
		tmp := fmt.Sprintf("mlfo%s%d", n.suffix, i) // unique while still in this namespace
		steps := [][]string{
			{"link", "add", tmp, "netns", ns, "type", "veth", "peer", "name", port, "netns", n.sw},
			{"-n", ns, "link", "set", tmp, "name", hostIface},
			{"-n", n.sw, "link", "set", port, "master", "br0"},
			{"-n", n.sw, "link", "set", port, "up"},
			{"-n", ns, "addr", "add", h.addr + prefixLen, "dev", hostIface},
			{"-n", ns, "link", "set", hostIface, "up"},
		}
		for _, s := range steps {
			if err := ipCmd(s...); err != nil {
				return nil, err
			}
		}
	}
	return n, nil
}

func (n *network) addNS(name string) error {
	if err := ipCmd("netns", "add", name); err != nil {
		return err
	}
	n.made = append(n.made, name)
	return ipCmd("-n", name, "link", "set", "lo", "up")
}

// teardown deletes every namespace this run made; it is safe to call twice.
func (n *network) teardown() []error {
	var errs []error
	for _, ns := range n.made {
		if err := ipCmd("netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	n.made = nil
	return errs
}

// setLink brings a host's interface up or down: the "host cut off" fault.
func (n *network) setLink(host string, up bool) error {
	state := "down"
	if up {
		state = "up"
	}
	return ipCmd("-n", n.hosts[host], "link", "set", hostIface, state)
}

// hasVIP reports whether host holds the virtual address.
func (n *network) hasVIP(host string) bool {
	out, err := exec.Command("ip", "-n", n.hosts[host], "-4", "-o", "addr", "show", "dev", hostIface).Output()
	return err == nil && strings.Contains(string(out), " "+vip+"/")
}
