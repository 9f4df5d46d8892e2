package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/monolock/monolock/client"
	"github.com/monolock/monolock/internal/certs/certstest"
	"github.com/monolock/monolock/internal/testsupport/proc"
	"github.com/monolock/monolock/protocol"
	"github.com/monolock/monolock/protocol/admin"
)

// The browser test drives the console of the built server in Debian's
// Chromium (make console-deps installs it and playwright-core), with real
// clients holding and waiting: browsertest/drive.mjs does what an operator
// does, this test owns the server and the clients and checks what they see.
// make test sets MONOLOCK_TEST_BROWSER=1, which turns a missing browser into
// a failure; elsewhere the test skips with what to install.

// step bounds each command of the driver and each wait for a client: a net
// against a hung test, never a timing assertion.
const step = 90 * time.Second

// lease is long enough that no client of the test loses its lock but by the
// console's hand.
const lease = 60 * time.Second

func chromiumPath(t *testing.T) string {
	t.Helper()
	path := os.Getenv("MONOLOCK_CHROMIUM")
	if path == "" {
		path = "/usr/bin/chromium"
	}
	driver := filepath.Join("browsertest", "node_modules", "playwright-core")
	var missing []string
	if _, err := exec.LookPath(path); err != nil {
		missing = append(missing, "Chromium at "+path)
	}
	if _, err := exec.LookPath("node"); err != nil {
		missing = append(missing, "node")
	}
	if _, err := os.Stat(driver); err != nil {
		missing = append(missing, driver)
	}
	if len(missing) > 0 {
		msg := fmt.Sprintf("the browser test needs %s: run make console-deps (or set MONOLOCK_CHROMIUM to a Chromium)", strings.Join(missing, ", "))
		if os.Getenv("MONOLOCK_TEST_BROWSER") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return path
}

type browser struct {
	t     *testing.T
	child *proc.Child
}

// do sends one command and returns the driver's "ok" answer, failing the
// test on anything else.
func (b *browser) do(cmd string, args ...any) string {
	b.t.Helper()
	line := cmd
	for _, a := range args {
		line += " " + fmt.Sprint(a)
	}
	if err := b.child.Send(line); err != nil {
		b.t.Fatalf("driver: send %q: %v\n%s", line, err, b.child.Stderr())
	}
	got, err := b.child.Next(step)
	if err != nil {
		b.t.Fatalf("driver: %s: %v\n%s", line, err, b.child.Stderr())
	}
	if !strings.HasPrefix(got.Text, "ok ") {
		b.t.Fatalf("driver: %s: %s", line, got.Text)
	}
	b.t.Logf("browser: %s", strings.TrimPrefix(got.Text, "ok "))
	return got.Text
}

// server starts bin/monolock's build of this tree with its admin port, and
// these flags.
func server(t *testing.T, flags ...string) *proc.Process {
	t.Helper()
	bin := proc.MustBinary(t, "./cmd/monolock")
	p, err := proc.Start(bin, proc.Options{
		Args:      append([]string{"-listen", "127.0.0.1:0", "-admin-listen", "127.0.0.1:0", "-log-format", "json"}, flags...),
		StartLine: proc.StartedMessage,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop() })
	return p
}

// startBrowser opens the console at url; with a certificate, extra is its
// PEM certificate and key files.
func startBrowser(t *testing.T, url string, extra ...string) *browser {
	t.Helper()
	chromium := chromiumPath(t)
	child, err := proc.StartChild("node", proc.ChildOptions{
		Args: append([]string{filepath.Join("browsertest", "drive.mjs"), url, chromium}, extra...),
	})
	if err != nil {
		t.Fatal(err)
	}
	b := &browser{t: t, child: child}
	t.Cleanup(func() {
		_ = child.Send("quit")
		_ = child.Close(step)
	})
	return b
}

// lockInfo reads one lock through the admin API, for the addresses the
// page must show.
func lockInfo(t *testing.T, adminAddr, name string) admin.LockInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), step)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+adminAddr+"/api/locks/"+strings.ReplaceAll(name, "/", "%2F"), nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var info admin.LockInfo
	if err := json.NewDecoder(res.Body).Decode(&info); err != nil || res.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v", name, res.StatusCode, err)
	}
	return info
}

// wantClosedByAdmin waits for l to be lost and checks that the server said
// ERROR 0x02, closed by administrator.
func wantClosedByAdmin(t *testing.T, l *client.Lock) {
	t.Helper()
	select {
	case <-l.Lost():
	case <-time.After(step):
		t.Fatalf("%s: the holder still has the lock after the console released it", l.Name())
	}
	var se *client.ServerError
	if err := l.Err(); !errors.As(err, &se) || se.Code != protocol.CodeClosedByAdmin {
		t.Fatalf("%s: the holder lost its lock with %v, want ERROR 0x02 (closed by administrator)", l.Name(), err)
	}
}

func granted(t *testing.T, l *client.Lock) {
	t.Helper()
	select {
	case <-l.Granted():
	case <-l.Lost():
		t.Fatalf("%s: the waiter lost its place: %v", l.Name(), l.Err())
	case <-time.After(step):
		t.Fatalf("%s: the waiter was not promoted after the release", l.Name())
	}
}

// holding is a client of srv holding name, and the context that bounds the
// test's client calls; both end with the test.
func holding(t *testing.T, srv *proc.Process, name string) (*client.Client, context.Context, *client.Lock) {
	t.Helper()
	c := client.New(client.Config{Address: srv.Addr})
	ctx, cancel := context.WithTimeout(context.Background(), 2*step)
	t.Cleanup(cancel)
	holder, err := c.Acquire(ctx, name, lease)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Close() })
	return c, ctx, holder
}

// TestConsoleInChromium: the page shows a lock a real client holds and its
// waiter; the operator force-releases it from the page (typing its name),
// the holder sees ERROR 0x02 and the waiter gets the lock; the same by
// keyboard alone; a waiter removed from its queue sees ERROR 0x02; the
// filter and the pages; screenshots at 1280×800 and on a phone, in
// bin/console/.
func TestConsoleInChromium(t *testing.T) {
	srv := server(t)
	b := startBrowser(t, "http://"+srv.AdminAddr+"/")
	const name = "deploy/prod"
	c, ctx, holder := holding(t, srv, name)
	waiter, err := c.Enqueue(ctx, name, lease)
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close()
	for _, n := range []string{"nightly/import", "nightly/export", "shard-3"} {
		l, err := c.Acquire(ctx, n, lease)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
	}
	info := lockInfo(t, srv.AdminAddr, name)
	if len(info.Waiters) != 1 || info.Holder.Token != holder.Token() {
		t.Fatalf("the API shows %+v, want the holder's token %d and one waiter", info, holder.Token())
	}
	token := strconv.FormatUint(holder.Token(), 10) // past 2^53: the page must show every digit
	b.do("expect", name, info.Holder.RemoteAddr, token, info.Waiters[0].RemoteAddr)

	root, err := proc.RootDir()
	if err != nil {
		t.Fatal(err)
	}
	shots := filepath.Join(root, "bin", "console")
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	b.do("screenshot", filepath.Join(shots, "console-1280x800.png"), 1280, 800)
	b.do("screenshot", filepath.Join(shots, "console-phone.png"), 390, 844)

	// The newest token is the last lock's: the next holder's is above it.
	newest := strconv.FormatUint(lockInfo(t, srv.AdminAddr, "shard-3").Holder.Token, 10)
	b.do("release-click", name, newest)
	wantClosedByAdmin(t, holder)
	granted(t, waiter)
	b.do("holder", name, info.Waiters[0].RemoteAddr)

	// By keyboard alone: the new holder loses it too.
	b.do("release-keys", name)
	wantClosedByAdmin(t, waiter)

	// Remove a waiter: it loses its place with ERROR 0x02, the holder keeps
	// the lock.
	const queued = "nightly/import"
	kicked, err := c.Enqueue(ctx, queued, lease)
	if err != nil {
		t.Fatal(err)
	}
	defer kicked.Close()
	addr := lockInfo(t, srv.AdminAddr, queued).Waiters[0].RemoteAddr
	b.do("kick", queued, addr)
	wantClosedByAdmin(t, kicked)

	// The filter and the pages: 51 locks under page/, 50 a page.
	for i := range 51 {
		l, err := c.Acquire(ctx, fmt.Sprintf("page/%02d", i), lease)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
	}
	b.do("pages", "page/*", 51, "page/50")
}

// TestConsoleWithoutTheReleaseRole: on an admin port with mutual TLS, an
// operator whose certificate the admin ACL grants only read sees the locks
// but no working release or remove button, and a release forged from the
// page's own script, with that certificate, gets 403 and changes nothing.
func TestConsoleWithoutTheReleaseRole(t *testing.T) {
	dir := t.TempDir()
	pki := certstest.NewPKI(t, dir)
	aclPath := filepath.Join(dir, "admin-acl.json")
	rules := `{"rules": [{"identity": "` + certstest.IdentityDNS + `", "roles": ["read"]}]}`
	if err := os.WriteFile(aclPath, []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := server(t, "-admin-tls-cert", pki.Server.Cert, "-admin-tls-key", pki.Server.Key,
		"-admin-tls-client-ca", pki.CA, "-admin-acl-file", aclPath)
	viewer := pki.Clients[certstest.ClientDNS]
	b := startBrowser(t, "https://"+srv.AdminAddr+"/", viewer.Cert, viewer.Key)

	c := client.New(client.Config{Address: srv.Addr})
	ctx, cancel := context.WithTimeout(context.Background(), step)
	defer cancel()
	const name = "deploy/prod"
	holder, err := c.Acquire(ctx, name, lease)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	waiter, err := c.Enqueue(ctx, name, lease)
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close()

	b.do("read-only", name)
	answer := b.do("forge-release", name)
	if !strings.HasPrefix(answer, "ok 403 ") || !strings.Contains(answer, "release") {
		t.Fatalf("a release forged with a read-only certificate: %s, want 403 naming the missing role", answer)
	}
	// Nothing changed: the holder keeps its lock (its next heartbeat is
	// answered ACQUIRED with the same token by a server that never closed it),
	// as the API shows to the same operator.
	https := &http.Client{Timeout: step, Transport: &http.Transport{TLSClientConfig: pki.ClientTLS(certstest.ClientDNS)}}
	res, err := https.Get("https://" + srv.AdminAddr + "/api/locks/" + strings.ReplaceAll(name, "/", "%2F"))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var info admin.LockInfo
	if err := json.NewDecoder(res.Body).Decode(&info); err != nil || info.Holder.Token != holder.Token() || len(info.Waiters) != 1 {
		t.Fatalf("after the forged release the API shows %+v (%v), want %s still held with token %d and its waiter", info, err, name, holder.Token())
	}
	if !holder.Valid() {
		t.Fatalf("the holder lost its lock: %v", holder.Err())
	}
}

// TestRebindingPageRefusedInChromium: a page whose own origin is a name that
// resolves to the server (Chromium's --host-resolver-rules stand in for the
// attacker's DNS) is same-origin with the admin port, yet the page itself,
// its read of the lock table and its force-release are refused with 421
// naming -http-allowed-hosts, and the holder keeps its lock. The console
// works at a name listed in -http-allowed-hosts and at localhost.
func TestRebindingPageRefusedInChromium(t *testing.T) {
	srv := server(t, "-http-allowed-hosts", "console.test")
	_, port, err := net.SplitHostPort(srv.AdminAddr)
	if err != nil {
		t.Fatal(err)
	}
	resolve := "--host-resolver-rules=MAP rebind.test 127.0.0.1, MAP console.test 127.0.0.1"
	const name = "deploy/prod"
	_, _, holder := holding(t, srv, name)

	attacker := startBrowser(t, "http://rebind.test:"+port+"/", resolve)
	answer := attacker.do("rebind", name)
	for _, want := range []string{"page 421 ", "GET 421 ", "POST 421 ", "-http-allowed-hosts"} {
		if !strings.Contains(answer, want) {
			t.Fatalf("a page on rebind.test (resolving to the server): %s; want %q (every call refused with 421 naming the setting)", answer, want)
		}
	}
	if info := lockInfo(t, srv.AdminAddr, name); !holder.Valid() || info.Holder.Token != holder.Token() {
		t.Fatalf("after the rebinding page's release the holder has %v (token %d), the API shows token %d; want the lock kept", holder.Err(), holder.Token(), info.Holder.Token)
	}
	_ = attacker.child.Send("quit")
	_ = attacker.child.Close(step)

	holderAddr := lockInfo(t, srv.AdminAddr, name).Holder.RemoteAddr
	for _, url := range []string{"http://console.test:" + port + "/", "http://localhost:" + port + "/"} {
		b := startBrowser(t, url, resolve)
		b.do("holder", name, holderAddr)
		_ = b.child.Send("quit")
		_ = b.child.Close(step)
	}
}
