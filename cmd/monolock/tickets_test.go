package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/monolock/monolock/client"
	"github.com/monolock/monolock/internal/certs/certstest"
	"github.com/monolock/monolock/internal/testsupport/proc"
	"github.com/monolock/monolock/internal/testsupport/wire"
	"github.com/monolock/monolock/protocol"
)

// newTicketKey is one line of a ticket key file, as `openssl rand -base64 32`
// prints it.
func newTicketKey(t *testing.T) string {
	t.Helper()
	var k [32]byte
	if _, err := rand.Read(k[:]); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(k[:])
}

func writeLines(t *testing.T, path string, lines ...string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// ticketServer runs an mTLS server with the lab ACL, an admin port and the
// ticket key file.
func ticketServer(t *testing.T, pki *certstest.PKI, aclPath, keys string) *proc.Process {
	t.Helper()
	return startServer(t, "-tls-cert", pki.Server.Cert, "-tls-key", pki.Server.Key, "-tls-client-ca", pki.CA,
		"-acl-file", aclPath, "-tls-ticket-keys", keys, "-admin-listen", "127.0.0.1:0")
}

// recordingDialer is a TLS dialer that keeps the connections it made, so a
// test can ask whether their handshakes resumed.
type recordingDialer struct {
	tls.Dialer
	mu    sync.Mutex
	conns []*tls.Conn
}

func (d *recordingDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := d.Dialer.DialContext(ctx, network, addr)
	if err == nil {
		d.mu.Lock()
		d.conns = append(d.conns, c.(*tls.Conn))
		d.mu.Unlock()
	}
	return c, err
}

func (d *recordingDialer) last() *tls.Conn {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.conns[len(d.conns)-1]
}

// holderIdentity is the identity the admin API shows for lock's holder.
func holderIdentity(t *testing.T, admin, lock string) string {
	t.Helper()
	_, body := get(t, "http://"+admin+"/api/locks/"+strings.ReplaceAll(lock, "/", "%2F"))
	var l struct {
		Holder struct {
			Identity string `json:"identity"`
		} `json:"holder"`
	}
	if err := json.Unmarshal([]byte(body), &l); err != nil {
		t.Fatalf("admin API %s: %s (%v)", lock, body, err)
	}
	return l.Holder.Identity
}

// TestTicketResumptionAcrossRestartAndPair: the Go client resumes its TLS
// session on a restarted server and on another server with the same key
// file; a resumed session has the identity of the full handshake (the ACL
// admits and refuses it alike, the admin API names it), and an ACL reload
// applies to resumed sessions too.
func TestTicketResumptionAcrossRestartAndPair(t *testing.T) {
	dir, pki, aclPath := labFiles(t)
	keys := filepath.Join(dir, "tickets")
	writeLines(t, keys, newTicketKey(t), newTicketKey(t))
	d := &recordingDialer{Dialer: tls.Dialer{Config: pki.ClientTLS(certstest.ClientURI)}}
	d.Config.ClientSessionCache = tls.NewLRUClientSessionCache(0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// acquire takes lock on p through the Go client and reports whether the
	// handshake resumed; the identity must be the full handshake's.
	acquire := func(p *proc.Process, lock string) bool {
		t.Helper()
		c := client.New(client.Config{Address: p.Addr, Dialer: d})
		l, err := c.Acquire(ctx, lock, time.Duration(testLease)*time.Millisecond)
		if err != nil {
			t.Fatalf("Acquire %s: %v", lock, err)
		}
		defer l.Close()
		if id := holderIdentity(t, p.AdminAddr, lock); id != certstest.IdentityURI {
			t.Errorf("%s: holder identity %q, want %q", lock, id, certstest.IdentityURI)
		}
		// The ACL judges a resumed session by the same identity: a lock its
		// rules do not name is refused.
		_, err = c.Acquire(ctx, "cn", time.Second)
		var se *client.ServerError
		if !errors.As(err, &se) || se.Code != protocol.CodeNotAuthorized {
			t.Errorf("Acquire cn as %s: %v, want ERROR 0x18", certstest.IdentityURI, err)
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.conns[len(d.conns)-2].ConnectionState().DidResume // the lock's connection
	}

	a := ticketServer(t, pki, aclPath, keys)
	if acquire(a, "nightly/1") {
		t.Fatal("the very first handshake resumed")
	}
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	restarted := ticketServer(t, pki, aclPath, keys)
	if !acquire(restarted, "nightly/2") {
		t.Error("no resumption on the restarted server")
	}
	other := ticketServer(t, pki, aclPath, keys)
	if !acquire(other, "nightly/3") {
		t.Error("no resumption on the other server of the pair")
	}

	// An ACL change reaches resumed sessions: drop the rule that admits
	// nightly/*, reload, and the resumed client is refused.
	writeLines(t, aclPath, `{"rules": [{"identity": "spiffe://lab/worker/*", "locks": ["shard-?"]}]}`)
	if err := other.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	other.MustWaitLog(t, "SIGHUP: ACL reloaded")
	_, err := client.New(client.Config{Address: other.Addr, Dialer: d}).Acquire(ctx, "nightly/4", time.Second)
	var se *client.ServerError
	if !errors.As(err, &se) || se.Code != protocol.CodeNotAuthorized {
		t.Errorf("after the ACL reload: %v, want ERROR 0x18", err)
	}
	if !d.last().ConnectionState().DidResume {
		t.Error("the refused connection did not resume; the test proves nothing about resumed sessions")
	}
}

// TestTicketKeyRotation: after SIGHUP a key moved to the second line still
// resumes, a key no longer in the file means a full handshake (never a
// failure), and a bad file keeps the previous keys with a log line.
func TestTicketKeyRotation(t *testing.T) {
	dir, pki, aclPath := labFiles(t)
	keys := filepath.Join(dir, "tickets")
	k1, k2, k3 := newTicketKey(t), newTicketKey(t), newTicketKey(t)
	writeLines(t, keys, k1)
	p := ticketServer(t, pki, aclPath, keys)
	cfg := pki.ClientTLS(certstest.ClientURI)
	cfg.ClientSessionCache = tls.NewLRUClientSessionCache(0)

	// connect takes shard-1 and reports whether the handshake resumed.
	connect := func() bool {
		t.Helper()
		c, err := wire.Dial(p.Addr, wire.Options{TLS: cfg})
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		defer c.NC.Close()
		c.SendAcquire("shard-1", testLease)
		if f, err := c.ReadErr(10 * time.Second); err != nil || f.Type != protocol.TypeAcquired {
			t.Fatalf("ACQUIRE: %+v %v", f, err)
		}
		return c.NC.(*tls.Conn).ConnectionState().DidResume
	}
	hup := func(want string) {
		t.Helper()
		if err := p.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		p.MustWaitLog(t, want)
	}

	if connect() {
		t.Fatal("first handshake resumed")
	}
	writeLines(t, keys, k2, k1) // k2 issues, k1 still accepted
	hup("session-ticket keys reloaded")
	if !connect() {
		t.Error("a ticket of a key on the second line did not resume")
	}
	writeLines(t, keys, "not base64!")
	hup("session-ticket keys not reloaded")
	if !connect() { // the ticket from k2, still in force
		t.Error("a bad key file did not keep the previous keys")
	}
	writeLines(t, keys, k3) // k1 and k2 rotated out
	hup("session-ticket keys reloaded")
	if connect() {
		t.Error("a ticket of a rotated-out key resumed")
	}
	if !connect() {
		t.Error("no resumption with the new key")
	}
}

// TestBadTicketKeyFile: a bad file stops the server at start with status 2
// and one line saying what is wrong and what to do.
func TestBadTicketKeyFile(t *testing.T) {
	dir, pki, _ := labFiles(t)
	short := base64.StdEncoding.EncodeToString([]byte("sixteen byte key"))
	cases := []struct{ name, content, want string }{
		{"missing", "", "no such file or directory; check the path"},
		{"empty", "# only a comment\n\n", "holds no key"},
		{"notbase64", newTicketKey(t) + "\n%%%\n", "line 2: not base64"},
		{"short", short + "\n", "line 1: the key is 16 bytes, want 32"},
	}
	for _, c := range cases {
		path := filepath.Join(dir, c.name)
		if c.name != "missing" {
			writeLines(t, path, c.content)
		}
		cmd := exec.Command(binary, "-listen", "127.0.0.1:0", "-tls-cert", pki.Server.Cert, "-tls-key", pki.Server.Key, "-tls-ticket-keys", path)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		exit, ok := err.(*exec.ExitError)
		if !ok || exit.ExitCode() != 2 {
			t.Errorf("%s: exit %v, want status 2", c.name, err)
		}
		line := strings.TrimSpace(stderr.String())
		if strings.Count(line, "\n") != 0 || !strings.Contains(line, c.want) || !strings.Contains(line, "openssl rand -base64 32") && c.name != "missing" {
			t.Errorf("%s: stderr %q, want one line with %q and how to make a key", c.name, line, c.want)
		}
	}
	// Without TLS the setting makes no sense.
	out, err := exec.Command(binary, "-tls-ticket-keys", filepath.Join(dir, "short")).CombinedOutput()
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 2 || !bytes.Contains(out, []byte("-tls-ticket-keys needs -tls-cert")) {
		t.Errorf("-tls-ticket-keys without TLS: %v %s", err, out)
	}
}

// TestTicketResumptionOpenSSL: a session saved by `openssl s_client` from one
// server resumes on another with the same key file.
func TestTicketResumptionOpenSSL(t *testing.T) {
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("openssl is not on PATH, so this check does not run; to run it: apt-get install openssl")
	}
	dir, pki, aclPath := labFiles(t)
	keys := filepath.Join(dir, "tickets")
	writeLines(t, keys, newTicketKey(t))
	a := ticketServer(t, pki, aclPath, keys)
	b := ticketServer(t, pki, aclPath, keys)
	sess := filepath.Join(dir, "session.pem")
	pair := pki.Clients[certstest.ClientURI]

	// sClient connects to addr and returns s_client's output once it has
	// written the session (with -sess_out) or finished the handshake.
	sClient := func(addr string, extra ...string) string {
		t.Helper()
		args := append([]string{"s_client", "-connect", addr, "-servername", certstest.ServerName,
			"-CAfile", pki.CA, "-cert", pair.Cert, "-key", pair.Key}, extra...)
		cmd := exec.Command(openssl, args...)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// An ACQUIRE makes the server answer, which carries s_client past the
		// session ticket; stdin stays open until the answer has arrived.
		if _, err := stdin.Write(protocol.AppendAcquire(nil, testLease, "shard-2")); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(out.String(), "Reused") && !strings.Contains(out.String(), "New, ") || !sessionWritten(sess, extra) {
			if time.Now().After(deadline) {
				t.Fatalf("openssl s_client %v: no session within 30s:\n%s", extra, out.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		_ = stdin.Close()
		_ = cmd.Wait()
		return out.String()
	}
	first := sClient(a.Addr, "-sess_out", sess)
	if !strings.Contains(first, "New, TLSv1.3") {
		t.Fatalf("first s_client: want a new TLS 1.3 session:\n%s", first)
	}
	second := sClient(b.Addr, "-sess_in", sess)
	if !strings.Contains(second, "Reused, TLSv1.3") {
		t.Fatalf("s_client on the other server with the saved session: want Reused:\n%s", second)
	}
}

// sessionWritten reports whether s_client has written its session file,
// when it was asked to.
func sessionWritten(path string, args []string) bool {
	for _, a := range args {
		if a == "-sess_out" {
			st, err := os.Stat(path)
			return err == nil && st.Size() > 0
		}
	}
	return true
}

// TestTicketKeyFileModeWarning: a key file others can read starts the server
// with a warning that says what to do.
func TestTicketKeyFileModeWarning(t *testing.T) {
	dir, pki, _ := labFiles(t)
	keys := filepath.Join(dir, "tickets")
	writeLines(t, keys, newTicketKey(t))
	if err := os.Chmod(keys, 0o644); err != nil {
		t.Fatal(err)
	}
	p := startServer(t, "-tls-cert", pki.Server.Cert, "-tls-key", pki.Server.Key, "-tls-ticket-keys", keys)
	p.MustWaitLog(t, "chmod 600 it")
}

// TestResumptionEndsWithItsCA: when a SIGHUP removes the CA that signed a
// client, that client's ticket no longer lets it in: the server checks the
// chain behind a resumed session against the CAs it trusts now (internal/certs
// verifies in VerifyConnection, which crypto/tls also runs on resumption), so
// the handshake fails, whether the client saw its ticket accepted first or
// not. A ticket never gives more than the certificate behind it would.
func TestResumptionEndsWithItsCA(t *testing.T) {
	dir, pki, aclPath := labFiles(t)
	keys := filepath.Join(dir, "tickets")
	writeLines(t, keys, newTicketKey(t))
	clientCA := filepath.Join(dir, "client-ca.pem")
	copyFile(t, pki.CA, clientCA)
	p := startServer(t, "-tls-cert", pki.Server.Cert, "-tls-key", pki.Server.Key, "-tls-client-ca", clientCA,
		"-acl-file", aclPath, "-tls-ticket-keys", keys)
	cfg := pki.ClientTLS(certstest.ClientURI)
	cfg.ClientSessionCache = tls.NewLRUClientSessionCache(0)
	// try connects and asks for shard-1; it returns the answer, or the
	// error of the handshake or of the first read.
	try := func() (wire.Frame, bool, error) {
		c, err := wire.Dial(p.Addr, wire.Options{TLS: cfg})
		if err != nil {
			return wire.Frame{}, false, err
		}
		defer c.NC.Close()
		if err := c.SendErr(wire.Acquire("shard-1", testLease)); err != nil {
			return wire.Frame{}, false, err
		}
		f, err := c.ReadErr(10 * time.Second)
		return f, c.NC.(*tls.Conn).ConnectionState().DidResume, err
	}
	if f, _, err := try(); err != nil || f.Type != protocol.TypeAcquired {
		t.Fatalf("first connection: %+v %v", f, err)
	}
	if f, resumed, err := try(); err != nil || f.Type != protocol.TypeAcquired || !resumed {
		t.Fatalf("second connection: %+v, resumed %v, %v; want a resumed grant", f, resumed, err)
	}
	copyFile(t, pki.OtherCA, clientCA) // the lab CA is no longer trusted
	if err := p.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	p.MustWaitLog(t, "SIGHUP: TLS files reloaded")
	f, resumed, err := try()
	if err == nil || f.Type == protocol.TypeAcquired {
		t.Fatalf("after the CA was removed: %+v, resumed %v, %v; want a refused handshake", f, resumed, err)
	}
	t.Logf("after the CA was removed: resumed %v, %v", resumed, err)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
