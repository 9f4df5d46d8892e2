package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/monolock/monolock/eventloop"
	"github.com/monolock/monolock/internal/haetcd"
	"github.com/monolock/monolock/internal/testsupport/proc"
	"github.com/monolock/monolock/internal/testsupport/testetcd"
	"github.com/monolock/monolock/internal/testsupport/wire"
	"github.com/monolock/monolock/protocol"
)

// Failover through etcd, with a real etcd and two real nodes: one leads,
// the other follows with its lock port closed; the leader dies (or stops
// past its deadline) and the follower takes over, after the longest lease
// granted, with tokens strictly above every token of the old leader.

// haTTL is the tests' etcd lease: the shortest there is, so a takeover
// takes a few seconds.
const haTTL = "2s"

// startNode starts a node of cluster "test" named name, on a lock port of
// its own.
func startNode(t *testing.T, etcd *testetcd.Server, name string) (p *proc.Process, addr string) {
	t.Helper()
	addr = freeLoopbackAddr(t)
	p = startServer(t, "-listen", addr, "-ha-etcd", etcd.Endpoint, "-ha-cluster", "test", "-ha-ttl", haTTL,
		"-ha-name", name+" "+addr, "-ops-listen", "127.0.0.1:0", "-admin-listen", "127.0.0.1:0")
	return p, addr
}

// freeLoopbackAddr is a loopback address with a port free now: a node
// opens its lock port afresh each term, so it needs a fixed one.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// haInfo reads a node's /api/info "ha" object.
func haInfoOf(t *testing.T, p *proc.Process) map[string]any {
	t.Helper()
	code, body := get(t, "http://"+p.AdminAddr+"/api/info")
	var info struct {
		HA map[string]any `json:"ha"`
	}
	if err := json.Unmarshal([]byte(body), &info); code != 200 || err != nil || info.HA == nil {
		t.Fatalf("/api/info: %d %s (%v)", code, body, err)
	}
	return info.HA
}

// expectRefused checks that nothing listens on addr.
func expectRefused(t *testing.T, addr string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err == nil {
		c.Close()
		t.Fatalf("%s accepted a connection; a follower has no lock listener", addr)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial %s: %v, want connection refused", addr, err)
	}
}

// grant acquires the free lock name on addr. A lease longer than any
// granted before waits for etcd to store it, and is answered ACQUIRED then,
// never WAITING first.
func grant(t *testing.T, addr, name string, leaseMS uint32) (*wire.Conn, uint64) {
	t.Helper()
	return wire.Holder(t, addr, wire.Options{}, name, leaseMS)
}

// etcdValue reads a key of the test cluster.
func etcdValue(t *testing.T, etcd *testetcd.Server, key string) string {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd.Endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := cli.Get(ctx, "/monolock/test/"+key)
	if err != nil || len(got.Kvs) != 1 {
		t.Fatalf("etcd %s: %v %v", key, got, err)
	}
	return string(got.Kvs[0].Value)
}

func TestHAFailoverThroughEtcd(t *testing.T) {
	etcd := testetcd.Start(t)
	a, aAddr := startNode(t, etcd, "a")
	a.MustWaitLog(t, eventloop.HAServingMessage)
	b, bAddr := startNode(t, etcd, "b")
	if line := b.MustWaitLog(t, haetcd.LeaderMessage); line["leader"] != "a "+aAddr {
		t.Fatalf("b observed leader %v, want %q", line["leader"], "a "+aAddr)
	}
	expectRefused(t, bAddr)
	if code, body := get(t, "http://"+b.OpsAddr+"/readyz"); code != 503 || !strings.Contains(body, "follower: the leader is a "+aAddr) {
		t.Fatalf("follower /readyz: %d %q", code, body)
	}
	if ha := haInfoOf(t, b); ha["role"] != "follower" || ha["leader"] != "a "+aAddr || ha["cluster"] != "test" {
		t.Fatalf("follower /api/info ha: %v", ha)
	}
	if ha := haInfoOf(t, a); ha["role"] != "leader" || ha["serving"] != true {
		t.Fatalf("leader /api/info ha: %v", ha)
	}

	// Tokens on the leader: above the clock rule's, from its block. The
	// longer lease is stored in etcd before its grant is sent.
	_, first := grant(t, aAddr, "x", 1500)
	if floor := uint64(time.Now().Add(-time.Hour).Unix()) << 32; first <= floor {
		t.Fatalf("first token %d is below the clock rule's %d", first, floor)
	}
	_, last := grant(t, aAddr, "y", 1000)
	if last <= first {
		t.Fatalf("tokens %d then %d", first, last)
	}
	if got := etcdValue(t, etcd, "max-lease"); got != "1500" {
		t.Fatalf("max-lease in etcd is %q, want 1500", got)
	}
	if got := etcdValue(t, etcd, "min-ttl"); got != "2000" {
		t.Fatalf("min-ttl in etcd is %q, want 2000 (the leader's -ha-ttl, written before it served)", got)
	}

	a.Kill()
	elected := b.MustWaitLog(t, eventloop.HAElectedMessage)
	if wait, _ := elected["wait"].(float64); wait <= 0 {
		t.Fatalf("b serves without waiting out the longest lease: %v", elected)
	}
	if credit, _ := elected["credit_ms"].(float64); credit != 400 {
		t.Fatalf("b's wait is shortened by %v ms, want 400 (0.2 × the 2 s TTL): %v", elected["credit_ms"], elected)
	}
	b.MustWaitLog(t, eventloop.HAServingMessage)
	_, took := grant(t, bAddr, "x", 1000)
	if took <= last {
		t.Fatalf("the new leader's token %d is not above the old leader's %d", took, last)
	}
	ceiling, err := strconv.ParseUint(etcdValue(t, etcd, "tokens"), 10, 64)
	if err != nil || took > ceiling {
		t.Fatalf("token %d outside the reserved blocks (ceiling %d, %v)", took, ceiling, err)
	}
}

// A leader stopped (SIGSTOP) past its deadline resumes with a holder's
// heartbeat waiting in its socket: its first turn ends the term, so the
// holder is told ERROR 0x01, never an answer of a leader, while the other
// node leads.
func TestHALeaderStoppedPastItsDeadline(t *testing.T) {
	etcd := testetcd.Start(t)
	a, aAddr := startNode(t, etcd, "a")
	a.MustWaitLog(t, eventloop.HAServingMessage)
	b, _ := startNode(t, etcd, "b")
	b.MustWaitLog(t, haetcd.LeaderMessage)
	holder, _ := grant(t, aAddr, "x", 500)

	if err := a.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	b.MustWaitLog(t, eventloop.HAServingMessage)
	holder.SendHeartbeat()
	if err := a.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	f, err := holder.ReadErr(0)
	if err != nil || f.Type != protocol.TypeError || f.Code != protocol.CodeShuttingDown || !strings.Contains(f.Reason, "not the leader of its cluster") {
		t.Fatalf("after the pause the holder got %v (%v), want ERROR 0x01 from a node that is not the leader", f, err)
	}
	// The server closes without reading the heartbeat, so the close may be
	// a reset rather than a FIN.
	if f, err := holder.ReadErr(0); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("after ERROR 0x01: %v (%v), want the connection closed", f, err)
	}
	a.MustWaitLog(t, eventloop.HAEndedMessage)
}

// A node elected whose lock port is taken by another process cannot serve:
// it ends the term at once and campaigns again, after a pause, until the
// port is free.
func TestHALockPortTakenEndsTheTerm(t *testing.T) {
	etcd := testetcd.Start(t)
	addr := freeLoopbackAddr(t)
	blocker, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Close()
	p := startServer(t, "-listen", addr, "-ha-etcd", etcd.Endpoint, "-ha-cluster", "test", "-ha-ttl", haTTL, "-ha-name", "a "+addr)
	ended := p.MustWaitLog(t, eventloop.HAEndedMessage)
	if why, _ := ended["why"].(string); !strings.Contains(why, "could not be opened") {
		t.Fatalf("the term ended for %q, want the lock port", why)
	}
	blocker.Close()
	p.MustWaitLog(t, eventloop.HAServingMessage)
	grant(t, addr, "x", 1000)
}
