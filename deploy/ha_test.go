package deploy_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/monolock/monolock/internal/testsupport/proc"
)

// settingNames are the environment variables monolock -h lists: the
// settings the server really has.
func settingNames(t *testing.T) map[string]bool {
	t.Helper()
	bin := proc.MustBinary(t, "./cmd/monolock")
	out, _ := exec.Command(bin, "-h").CombinedOutput() // the usage, whatever the exit status
	names := map[string]bool{}
	for _, m := range regexp.MustCompile(`\bMONOLOCK_[A-Z0-9_]+\b`).FindAllString(string(out), -1) {
		names[m] = true
	}
	if !names["MONOLOCK_LISTEN_ADDRESS"] {
		t.Fatalf("monolock -h lists no MONOLOCK_LISTEN_ADDRESS:\n%s", out)
	}
	return names
}

// Every MONOLOCK_* variable the deployment files set, commented out or
// not, is a setting of the server; a misspelt one would be ignored
// silently. The HA files set the HA settings.
func TestDeploymentFilesNameRealSettings(t *testing.T) {
	have := settingNames(t)
	files := []string{"kubernetes.yaml", "kubernetes-ha.yaml", "monolock.service", "monolock-ha.conf"}
	used := map[string][]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`\bMONOLOCK_[A-Z0-9_]+\b`).FindAllString(string(data), -1) {
			if m == "MONOLOCK_VRRP_STATE_DIR" || strings.HasSuffix(m, "_") || slices.Contains(used[f], m) {
				continue // the keepalived scripts' own; a prefix in prose (MONOLOCK_ADMIN_TLS_*); seen
			}
			used[f] = append(used[f], m)
			if !have[m] {
				t.Errorf("%s sets %s, which monolock -h does not list", f, m)
			}
		}
	}
	for _, f := range []string{"kubernetes-ha.yaml", "monolock-ha.conf"} {
		for _, want := range []string{"MONOLOCK_HA_ETCD", "MONOLOCK_HA_CLUSTER", "MONOLOCK_HA_TTL", "MONOLOCK_HA_NAME"} {
			if !slices.Contains(used[f], want) {
				t.Errorf("%s does not set %s", f, want)
			}
		}
	}
}

// k8sObject is the part of a Kubernetes object the test reads.
type k8sObject struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec struct {
		Replicas                 int                   `yaml:"replicas"`
		ServiceName              string                `yaml:"serviceName"`
		ClusterIP                string                `yaml:"clusterIP"`
		PublishNotReadyAddresses bool                  `yaml:"publishNotReadyAddresses"`
		Selector                 map[string]any        `yaml:"selector"`
		UpdateStrategy           struct{ Type string } `yaml:"updateStrategy"`
		Template                 struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec struct {
				Containers []k8sContainer `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type k8sContainer struct {
	Args []string `yaml:"args"`
	Env  []struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	ReadinessProbe struct {
		HTTPGet struct {
			Path string `yaml:"path"`
			Port string `yaml:"port"`
		} `yaml:"httpGet"`
	} `yaml:"readinessProbe"`
}

func (c k8sContainer) env(name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func (c k8sContainer) port(name string) int {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

func readObjects(t *testing.T, path string) map[string]k8sObject {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	objs := map[string]k8sObject{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var o k8sObject
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		objs[o.Kind+"/"+o.Metadata.Name] = o
	}
	return objs
}

// deploy/kubernetes-ha.yaml: two or three monolock replicas with the HA
// settings; readiness from /readyz on the ops port, so the Service that
// routes by readiness reaches the leader alone; MONOLOCK_HA_ETCD names
// every member of the etcd StatefulSet by its stable DNS name, the same
// members its --initial-cluster lists.
func TestKubernetesHA(t *testing.T) {
	objs := readObjects(t, "kubernetes-ha.yaml")
	mono, ok := objs["StatefulSet/monolock"]
	if !ok {
		t.Fatalf("no StatefulSet monolock in kubernetes-ha.yaml (have %v)", keys(objs))
	}
	if r := mono.Spec.Replicas; r < 2 || r > 3 {
		t.Errorf("monolock replicas %d, want 2 or 3", r)
	}
	if mono.Spec.UpdateStrategy.Type != "OnDelete" {
		t.Errorf("monolock updateStrategy %q: a rolling update waits for followers to be Ready, which they never are; want OnDelete", mono.Spec.UpdateStrategy.Type)
	}
	c := mono.Spec.Template.Spec.Containers[0]
	if p := c.ReadinessProbe.HTTPGet; p.Path != "/readyz" || p.Port != "ops" {
		t.Errorf("readiness probe %+v, want /readyz on the ops port", p)
	}
	if ops := c.env("MONOLOCK_OPS_LISTEN_ADDRESS"); !strings.HasSuffix(ops, fmt.Sprintf(":%d", c.port("ops"))) || strings.HasPrefix(ops, "127.") {
		t.Errorf("MONOLOCK_OPS_LISTEN_ADDRESS %q: the kubelet must reach it on the ops port %d", ops, c.port("ops"))
	}
	if l := c.env("MONOLOCK_LISTEN_ADDRESS"); !strings.HasSuffix(l, fmt.Sprintf(":%d", c.port("protocol"))) {
		t.Errorf("MONOLOCK_LISTEN_ADDRESS %q is not the protocol port %d", l, c.port("protocol"))
	}
	if n := c.env("MONOLOCK_HA_NAME"); !strings.Contains(n, "$(POD_IP):7070") {
		t.Errorf("MONOLOCK_HA_NAME %q does not name the address clients reach", n)
	}
	svc := objs["Service/monolock"]
	if svc.Spec.PublishNotReadyAddresses || svc.Spec.Selector["app.kubernetes.io/name"] != mono.Spec.Template.Metadata.Labels["app.kubernetes.io/name"] {
		t.Errorf("Service monolock must select the monolock pods by readiness (selector %v, publishNotReadyAddresses %v)", svc.Spec.Selector, svc.Spec.PublishNotReadyAddresses)
	}
	nodes := objs["Service/"+mono.Spec.ServiceName]
	if nodes.Spec.ClusterIP != "None" || !nodes.Spec.PublishNotReadyAddresses {
		t.Errorf("Service %s (the StatefulSet's) must be headless and publish every pod, ready or not", mono.Spec.ServiceName)
	}

	etcd, ok := objs["StatefulSet/monolock-etcd"]
	if !ok {
		t.Fatal("no StatefulSet monolock-etcd")
	}
	var members, peers []string
	for i := range etcd.Spec.Replicas {
		host := fmt.Sprintf("%s-%d.%s", etcd.Metadata.Name, i, etcd.Spec.ServiceName)
		members = append(members, "http://"+host+":2379")
		peers = append(peers, fmt.Sprintf("%s-%d=http://%s:2380", etcd.Metadata.Name, i, host))
	}
	if got := c.env("MONOLOCK_HA_ETCD"); got != strings.Join(members, ",") {
		t.Errorf("MONOLOCK_HA_ETCD %q, want every member: %q", got, strings.Join(members, ","))
	}
	if !slices.Contains(etcd.Spec.Template.Spec.Containers[0].Args, "--initial-cluster="+strings.Join(peers, ",")) {
		t.Errorf("etcd's --initial-cluster does not list its %d members %v", etcd.Spec.Replicas, peers)
	}
	if s := objs["Service/"+etcd.Spec.ServiceName]; s.Spec.ClusterIP != "None" {
		t.Errorf("etcd's Service %s is not headless: the members' DNS names need it", etcd.Spec.ServiceName)
	}
}

func keys(m map[string]k8sObject) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// The HA drop-in, applied to monolock.service, is a unit systemd accepts.
func TestSystemdHA(t *testing.T) {
	analyze := lookTool(t, "systemd-analyze", "apt-get install systemd")
	dir := t.TempDir()
	unit, err := os.ReadFile("monolock.service")
	if err != nil {
		t.Fatal(err)
	}
	bin := proc.MustBinary(t, "./cmd/monolock")
	unitText := strings.ReplaceAll(string(unit), "/usr/local/bin/monolock", bin)
	if err := os.WriteFile(filepath.Join(dir, "monolock.service"), []byte(unitText), 0o644); err != nil {
		t.Fatal(err)
	}
	dropIn, err := os.ReadFile("monolock-ha.conf")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "monolock.service.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "monolock.service.d", "ha.conf"), dropIn, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(analyze, "verify", filepath.Join(dir, "monolock.service"))
	cmd.Env = append(os.Environ(), "SYSTEMD_UNIT_PATH="+dir+":")
	// verify exits 0 on a line it ignores ("Invalid environment
	// assignment, ignoring"): any word about the files is a failure.
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Contains(string(out), dir) {
		t.Fatalf("systemd-analyze verify monolock.service with the HA drop-in: %v\n%s", err, out)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	proc.Cleanup() // the binary MustBinary built
	os.Exit(code)
}
