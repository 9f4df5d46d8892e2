package scenario

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monolock/monolock/bench/check"
	"github.com/monolock/monolock/bench/clock"
	"github.com/monolock/monolock/bench/report"
	"github.com/monolock/monolock/internal/certs/certstest"
	"github.com/monolock/monolock/protocol"
)

// lockServer is a minimal lock server for the S6 client: the first ACQUIRE
// of a name is granted, later ones wait; a heartbeat is answered with the
// session's state. Nothing is ever released (sessions stay for the test).
func lockServer(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg != nil {
		ln = tls.NewListener(ln, cfg)
	}
	var (
		mu    sync.Mutex
		held  = map[string]bool{}
		token uint64
	)
	return serveConns(t, ln, func(c net.Conn) {
		r := bufio.NewReader(c)
		hdr := make([]byte, protocol.AcquireHeaderLen)
		if _, err := io.ReadFull(r, hdr); err != nil {
			return
		}
		name := make([]byte, binary.BigEndian.Uint16(hdr[6:]))
		if _, err := io.ReadFull(r, name); err != nil {
			return
		}
		mu.Lock()
		var answer []byte
		if held[string(name)] {
			answer = protocol.AppendWaiting(nil)
		} else {
			held[string(name)] = true
			token++
			answer = protocol.AppendAcquired(nil, token)
		}
		mu.Unlock()
		for {
			if _, err := c.Write(answer); err != nil {
				return
			}
			if b, err := r.ReadByte(); err != nil || b != byte(protocol.TypeHeartbeat) {
				return
			}
		}
	})
}

func TestGoSessionsPlainAndTLS(t *testing.T) {
	clk := clock.New()
	pki, err := certstest.Generate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	serverCert, err := tls.LoadX509KeyPair(pki.Server.Cert, pki.Server.Key)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		srv, clnt *tls.Config
	}{
		{"plain", nil, nil},
		{"tls", &tls.Config{Certificates: []tls.Certificate{serverCert}}, pki.ClientTLS("")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := lockServer(t, tc.srv)
			chk := check.New()
			const sessions = 20
			g := newGoSessions(clk, addr, tc.clnt, sessions, 200*time.Millisecond, chk)
			if err := g.Open(time.Now().Add(10 * time.Second)); err != nil {
				t.Fatal(err)
			}
			if n := g.setup.Count(); n != sessions {
				t.Fatalf("%d sessions set up, want %d", n, sessions)
			}
			from := clk.Now()
			g.until.Store(from + int64(300*time.Millisecond))
			g.from.Store(from)
			time.Sleep(400 * time.Millisecond)
			if err := g.Stop(); err != nil {
				t.Fatal(err)
			}
			// 20 sessions every 50 ms for 300 ms: about 120 heartbeats.
			if g.hbWindow < 60 || g.hist.Count() != g.hbWindow {
				t.Fatalf("%d heartbeats in the window, histogram %d", g.hbWindow, g.hist.Count())
			}
			if v := chk.Violations(); len(v) > 0 || chk.Grants() != sessions/2 || g.promoted != 0 {
				t.Fatalf("violations %v, grants %d, promoted %d", v, chk.Grants(), g.promoted)
			}
		})
	}
}

func TestGoSessionsReportsARefusal(t *testing.T) {
	clk := clock.New()
	addr := fakeServer(t, func(c net.Conn) {
		_ = readAcquire(c)
		_, _ = c.Write(protocol.AppendError(nil, protocol.Code(0x18), "denied"))
	})
	g := newGoSessions(clk, addr, nil, 4, time.Second, check.New())
	err := g.Open(time.Now().Add(5 * time.Second))
	_ = g.Stop()
	if err == nil || !strings.Contains(err.Error(), "denied") {
		t.Fatalf("Open = %v, want the ERROR frame", err)
	}
}

func TestRotation(t *testing.T) {
	seen := map[int]bool{}
	for rep := range 3 {
		r := rotation(3, rep)
		s := slices.Clone(r)
		slices.Sort(s)
		if !slices.Equal(s, []int{0, 1, 2}) {
			t.Fatalf("rotation(3, %d) = %v", rep, r)
		}
		seen[r[0]] = true
	}
	if len(seen) != 3 {
		t.Fatalf("every alternative should come first once: %v", seen)
	}
}

func TestServerArgs(t *testing.T) {
	p := &certstest.PKI{CA: "ca.pem", Server: certstest.Pair{Cert: "s.pem", Key: "s-key.pem"}}
	if a := tlsServerArgs(modePlain, p); len(a) != 0 {
		t.Fatalf("plain: %v", a)
	}
	if a := strings.Join(tlsServerArgs(modeTLS, p), " "); a != "-tls-cert s.pem -tls-key s-key.pem" {
		t.Fatalf("tls: %s", a)
	}
	if a := strings.Join(tlsServerArgs(modeMTLS, p), " "); a != "-tls-cert s.pem -tls-key s-key.pem -tls-client-ca ca.pem" {
		t.Fatalf("mtls: %s", a)
	}
	if a := bookkeepingArgs(cfgBare, "x"); len(a) != 0 {
		t.Fatalf("bare: %v", a)
	}
	if a := strings.Join(bookkeepingArgs(cfgOps, "x"), " "); a != "-ops-listen 127.0.0.1:0" {
		t.Fatalf("ops: %s", a)
	}
	if a := strings.Join(bookkeepingArgs(cfgAudit, "/tmp/a.jsonl"), " "); a != "-ops-listen 127.0.0.1:0 -audit-log /tmp/a.jsonl" {
		t.Fatalf("audit: %s", a)
	}
	if modePlain.system() != report.SysMonolock || cfgBare.system() != report.SysMonolock {
		t.Fatal("the reference rows must be monolock's, for the ×monolock column")
	}
}

func TestCountLines(t *testing.T) {
	s, err := countLines(strings.NewReader(strings.Repeat(`{"event":"granted"}`+"\n", 1000) + "partial"))
	if err != nil || s.events != 1000 || s.bytes != 20*1000+7 {
		t.Fatalf("countLines = %+v, %v", s, err)
	}
}

func TestMedianOf(t *testing.T) {
	id := func(v float64) float64 { return v }
	if m := medianOf([]float64{3, 1, 2}, id); m != 2 {
		t.Fatalf("median %v", m)
	}
	if m := medianOf([]float64{4, 1, 2, 3}, id); m != 2.5 {
		t.Fatalf("median %v", m)
	}
	if m := medianOf(nil, id); m != 0 {
		t.Fatalf("median of nothing %v", m)
	}
}

func TestRenderSummaries(t *testing.T) {
	if report.RenderTLSCost(nil) != "" || report.RenderBookkeeping(nil) != "" {
		t.Fatal("no summary without the scenario")
	}
	tc := report.RenderTLSCost(&report.TLSCost{Sessions: 2000, Modes: []report.TLSModeFigures{
		{Mode: "plain", RSSPerSessionBytes: 1000, CPUPerMHb: 10, RTTP50NS: 100e3, RTTP99NS: 1e6, SetupPerSessionUS: 50, SetupCPUPerSessionUS: 40},
		{Mode: "tls", RSSPerSessionBytes: 20000, CPUPerMHb: 25, RTTP50NS: 200e3, RTTP99NS: 2e6, SetupPerSessionUS: 800, SetupCPUPerSessionUS: 600},
	}})
	for _, want := range []string{"@2,000 sessions", "plain 1,000 B · tls 20,000 B (20.0×)", "plain 10 s · tls 25 s (2.50×)", "plain 100µs · tls 200µs (2.00×)", "tls 600 µs (15.0×)"} {
		if !strings.Contains(tc, want) {
			t.Errorf("TLS summary lacks %q:\n%s", want, tc)
		}
	}
	bk := report.RenderBookkeeping(&report.Bookkeeping{Sessions: 10000, Target: 1.1, Configs: []report.BookkeepingFigures{
		{Config: "bare", CPUPerGrant: 50, CPUPerMHb: 16},
		{Config: "ops", CPUPerGrant: 51, CPUPerMHb: 16.5, GrantRatio: 1.02, HbRatio: 16.5 / 16},
		{Config: "ops+audit"},
	}})
	for _, want := range []string{"target under 1.10×", "bare 50 µs · ops 51 µs (1.02×: met) · ops+audit –", "@10,000", "ops 16.5 s (1.03×: met)"} {
		if !strings.Contains(bk, want) {
			t.Errorf("bookkeeping summary lacks %q:\n%s", want, bk)
		}
	}
	bk = report.RenderBookkeeping(&report.Bookkeeping{Sessions: 10000, Target: 1.1, Configs: []report.BookkeepingFigures{
		{Config: "bare", CPUPerGrant: 50, CPUPerMHb: 16},
		{Config: "ops+audit", CPUPerGrant: 56, CPUPerMHb: 16, GrantRatio: 1.12, HbRatio: 1},
	}})
	for _, want := range []string{"ops+audit 56 µs (1.12×: not met)"} {
		if !strings.Contains(bk, want) {
			t.Errorf("bookkeeping summary lacks %q:\n%s", want, bk)
		}
	}
}

func TestS6S7Sizes(t *testing.T) {
	for _, sz := range []sizes{fullSizes(19500), quickSizes(19500), fullSizes(1000)} {
		for _, n := range []int{sz.s6Sessions, sz.s7Sessions} {
			if n <= 0 || n%2 != 0 || n > 19500 {
				t.Fatalf("bad session count %d in %+v", n, sz)
			}
		}
		if sz.s6Runs < 1 || sz.s7Runs < 1 || sz.s6Lease <= 0 || sz.s6Window <= 0 {
			t.Fatalf("sizes %+v", sz)
		}
	}
	if q := quickSizes(19500); q.s6Sessions > 500 || q.s7Sessions > 2000 || q.s6Window > time.Second {
		t.Fatalf("quick sizes are not quick: %+v", q)
	}
}

// Stop closes holders before their waiters, and a waiter in the middle of a
// heartbeat may read the grant that the close pushes to it. That grant is no
// second holder: the checker must not be told of it.
func TestGoSessionsJudgeNothingAfterStop(t *testing.T) {
	clk := clock.New()
	chk := check.New()
	g := newGoSessions(clk, "127.0.0.1:1", nil, 2, 2*time.Second, chk)
	holder := &goSession{id: 0, f: protocol.Frame{Type: protocol.TypeAcquired, Token: 1}}
	g.check(holder, clk.Now(), true)
	g.lastAck[0].Store(clk.Now()) // the holder's lease runs for another 2 s
	if err := g.Stop(); err != nil {
		t.Fatal(err)
	}
	waiter := &goSession{id: 1, f: protocol.Frame{Type: protocol.TypeAcquired, Token: 2}}
	g.check(waiter, clk.Now(), false)
	if v := chk.Violations(); len(v) != 0 {
		t.Fatalf("a grant read after Stop was judged: %v", v)
	}
	if chk.Grants() != 1 {
		t.Fatalf("checker saw %d grants, want the holder's 1", chk.Grants())
	}
}
