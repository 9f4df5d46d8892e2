// Command adversarial is monolock's adversarial harness (`make adversarial`).
//
// It runs bin/monolock as child processes on loopback: a plain server with
// its ops and admin ports, and a mutual-TLS server with its ops port. Three
// witnesses watch each server throughout: a canary that holds a lock on a
// 2 s lease and heartbeats every 200 ms, a prober that takes a fresh lock
// every 200 ms (connect, handshake, ACQUIRE, ACQUIRED within 2 s), and a
// readiness probe of /readyz with a 1 s timeout every 250 ms. Then it runs
// each attack in turn for -duration, against the server it concerns:
//
//  1. admin reads of a long queue: 10,000 waiters on one lock, 16 clients
//     reading it with GET /api/locks/{name} over and over;
//  2. silent TLS sockets: 640 connections that send 11 bytes of a
//     ClientHello and wait, reopened as soon as the server closes them;
//  3. slow HTTP clients: 300 connections to each ops port and the admin
//     port trickling a request header a byte a second, reopened when closed;
//  4. KeyUpdate floods: 80 mutual-TLS sessions sending 128 KiB of KeyUpdate
//     records every 4 s, a heartbeat every 8 records;
//  5. non-reading pipeliners: 20 holders pipelining 400,000 heartbeats each
//     and never reading, reopened when closed;
//  6. expensive ?match=: 4,000 held 255-byte names, 64 clients listing them
//     with "*" + 200 × "?" + "b*" over and over;
//  7. half-sent TLS handshake messages: 500 sessions each holding a
//     post-handshake message that declares 65,535 bytes, reopened when
//     closed;
//  8. descriptor exhaustion with mutual TLS: a third server, limited to 256
//     descriptors, under 400 silent connections reopened when closed,
//     watched by its own witnesses;
//  9. silent waiters and churners at the descriptor limit, plain: a server
//     limited to -waiters-nofile descriptors (2,000) filled with waiters
//     that never heartbeat up to 100 short of the limit, then -churners
//     (2,000) silent connections reopened as soon as they are closed, all
//     from 127.0.0.2, the waiters silent past a -waiter-silence-limit of
//     10 s when the window opens;
//     witnessed directly and through a proxy with a 150 ms round trip, with
//     honest clients (5 s each, direct and at 150 ms) and fresh-connection
//     requests to its ops and admin ports, any failure a violation;
//  10. the same against a mutual-TLS server (TLS 1.2 and 1.3 at 150 ms);
//  11. forged client chains: 64 mutual-TLS clients presenting a leaf and -forged-certs (60)
//     self-signed P-521 certificates bearing the client CA's name, with the
//     server's CPU per handshake against honest ones and the honest clients'
//     dial-to-ACQUIRED p99;
//  12. client certificates with 1,000 SANs: 64 clients opening up to 2,000
//     sessions with a valid such certificate and holding those let in;
//  13. a wall of consoles: 10,000 held locks, 50 consoles refreshing on the
//     same 2 s ticks as the admin port's console does (GET /api/info, then
//     GET /api/locks?limit=50, each console over a connection of its own);
//  14. DNS rebinding: the requests of a page whose name rebinds to 127.0.0.1
//     (Host attacker.example, same-origin) read the lock table, force-release
//     a lock, kick a waiter and read /metrics: each must get 421, the
//     holder must keep its lock, and the bound address and localhost must
//     still be answered;
//  15. a client not reading a full listing: one GET /api/locks of 10,000
//     held 250-byte names (4.7 MB) left unread while 12 consoles poll
//     (GET /api/info, then a page), all 12 answered;
//  16. full listings ten times a second: 4 clients asking for every one of
//     those locks every 100 ms, whether their last request was answered or
//     not, and from 2 s on 12 consoles polling, all 12 answered;
//  17. reloads that must not hold the server (reloads.go): a FIFO at the
//     ACL, client CA and audit log paths, SIGHUP then SIGTERM, the exit within
//     1 s; a 256 MiB file at the ACL and client CA paths, SIGHUP, the reload
//     refused and the peak RSS within 64 MiB of before;
//  18. attack 9's shape with young waiters: the default
//     -waiter-silence-limit, the window open a second after the churners
//     start;
//  19. the same against a mutual-TLS server;
//  20. attack 9's shape with waiters that heartbeat every 50 s;
//  21. the same against a mutual-TLS server.
//
// For each attack it reports the canaries' worst heartbeat round trip, the
// locks lost, the probes failed, the /readyz probes failed and the servers'
// peak RSS; any loss or failure is a violation, and the exit status is 1.
// Everything stays on 127.0.0.1; every attack is bounded in connections
// and time, and the run takes about three minutes.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/monolock/monolock/internal/certs/certstest"
	"github.com/monolock/monolock/internal/testsupport/proc"
)

func main() {
	os.Exit(run())
}

type config struct {
	server        string
	duration      time.Duration
	only          map[int]bool
	waitersNofile int // attacks 9 and 10: the limited server's descriptors
	churners      int // attacks 9 and 10: silent connections reopened when closed
	forgedCerts   int // attack 11: the forged certificates above the leaf
}

func run() int {
	var cfg config
	var only string
	flag.StringVar(&cfg.server, "server", "../bin/monolock", "the monolock binary")
	flag.DurationVar(&cfg.duration, "duration", 8*time.Second, "how long each attack lasts")
	flag.StringVar(&only, "only", "", "comma-separated attack numbers to run (default: all)")
	flag.IntVar(&cfg.waitersNofile, "waiters-nofile", 2000, "attacks 9 and 10: the descriptor limit of the server filled with silent waiters (at most this process's limit less -churners and 2,048)")
	var child waiterChild
	child.flags()
	flag.IntVar(&cfg.churners, "churners", 2000, "attacks 9 and 10: silent connections reopened as soon as the server closes them")
	flag.IntVar(&cfg.forgedCerts, "forged-certs", 60, "attack 11: the forged P-521 certificates each client sends above its leaf")
	flag.Parse()
	if child.addr != "" {
		return child.run()
	}
	if only != "" {
		cfg.only = map[int]bool{}
		for _, f := range strings.Split(only, ",") {
			var n int
			if _, err := fmt.Sscan(f, &n); err != nil {
				fmt.Fprintf(os.Stderr, "adversarial: -only %q: give attack numbers 1 to %d, such as -only 1,3\n", only, len(attacks))
				return 2
			}
			cfg.only[n] = true
		}
	}
	procs := &proc.Group{} // every server of this run, stopped at its end or on an interrupt
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		procs.StopAll()
		os.Exit(2)
	}()
	defer procs.StopAll()

	e, err := setUp(cfg, procs)
	if err != nil {
		fmt.Fprintf(os.Stderr, "adversarial: %v\n", err)
		return 2
	}
	defer e.tearDown()

	loadBefore := loadAverage()
	var rows []row
	for _, a := range attacks {
		if cfg.only != nil && !cfg.only[a.n] {
			continue
		}
		fmt.Fprintf(os.Stderr, "attack %d: %s\n", a.n, a.name)
		r := e.run(a)
		rows = append(rows, r)
		fmt.Fprintf(os.Stderr, "  %s\n", r.summary())
	}
	printTable(os.Stdout, rows)
	violations := 0
	for _, r := range rows {
		if r.err != nil || r.seen.violated() || strings.Contains(r.note, violation) {
			violations++
		}
	}
	fmt.Printf("\nadversarial: %d attacks, %d with violations (load average %s before, %s after)\n", len(rows), violations, loadBefore, loadAverage())
	if violations > 0 {
		return 1
	}
	return 0
}

// env is the servers under attack and their witnesses.
type env struct {
	cfg     config
	procs   *proc.Group // every process the run starts: give it as proc.Options.Group
	dir     string
	pki     *certstest.PKI
	plain   *proc.Process
	mtls    *proc.Process
	tlsArgs []string
	watched []*witnesses
	tPlain  target
	tMTLS   target
}

func setUp(cfg config, procs *proc.Group) (*env, error) {
	dir, err := os.MkdirTemp("", "monolock-adversarial-")
	if err != nil {
		return nil, err
	}
	e := &env{cfg: cfg, dir: dir, procs: procs}
	if e.pki, err = certstest.Generate(dir); err != nil {
		return nil, fmt.Errorf("make the TLS material: %w", err)
	}
	e.tlsArgs = []string{"-tls-cert", e.pki.Server.Cert, "-tls-key", e.pki.Server.Key, "-tls-client-ca", e.pki.CA}
	if e.plain, err = e.startServer(filepath.Join(dir, "plain.log"), "-ops-listen", "127.0.0.1:0", "-admin-listen", "127.0.0.1:0"); err != nil {
		return nil, err
	}
	if e.mtls, err = e.startServer(filepath.Join(dir, "mtls.log"), append([]string{"-ops-listen", "127.0.0.1:0"}, e.tlsArgs...)...); err != nil {
		return nil, err
	}
	e.tPlain = target{name: "plain", addr: e.plain.Addr, ops: e.plain.OpsAddr, pid: e.plain.Pid()}
	e.tMTLS = target{name: "mTLS", addr: e.mtls.Addr, ops: e.mtls.OpsAddr, tls: e.clientTLS(), pid: e.mtls.Pid()}
	e.watched = []*witnesses{watch(e.tPlain), watch(e.tMTLS)}
	return e, nil
}

func (e *env) clientTLS() *tls.Config { return e.pki.ClientTLS(certstest.ClientURI) }

func (e *env) tearDown() {
	for _, w := range e.watched {
		w.close()
	}
	for _, p := range []*proc.Process{e.plain, e.mtls} {
		if p != nil {
			_ = p.Stop()
		}
	}
	_ = os.RemoveAll(e.dir)
}

// startServer runs the server binary with args on a free loopback port,
// logging to logFile.
func (e *env) startServer(logFile string, args ...string) (*proc.Process, error) {
	bin := e.cfg.server
	p, err := proc.Monolock(bin, proc.Options{
		Group:        e.procs,
		Args:         append([]string{"-log-level", "info"}, args...),
		LogFile:      logFile,
		StartTimeout: 15 * time.Second,
		StopGrace:    15 * time.Second,
	})
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	return p, nil
}

// loadAverage is the machine's one-minute load average, for the reader of
// figures measured on a shared machine.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "unknown"
}

// row is one attack's line of the report.
type row struct {
	a    attack
	seen window
	note string
	err  error
}

func (r row) summary() string {
	if r.err != nil {
		return "could not run: " + r.err.Error()
	}
	s := fmt.Sprintf("canary worst RTT %v, locks lost %d, probes failed %d/%d, /readyz failed %d/%d, peak RSS %d MiB; %s",
		r.seen.worstRTT.Round(time.Millisecond), r.seen.canaryLost, r.seen.probesFailed, r.seen.probes, r.seen.readyFailed, r.seen.ready, r.seen.peakRSS>>20, r.note)
	for _, why := range []string{r.seen.lostWhy, r.seen.probeWhy, r.seen.readyWhy} {
		if why != "" {
			s += "\n    first failure: " + why
		}
	}
	return s
}

// run prepares an attack, starts the witnesses' window, runs the attack
// for the duration and collects what they saw.
func (e *env) run(a attack) row {
	r := row{a: a}
	p, err := a.start(e)
	extra, stop := p.extra, p.stop
	if err != nil {
		r.err = err
		return r
	}
	watched := append(append([]*witnesses(nil), e.watched...), extra...)
	for _, w := range watched {
		if err := w.awaitCanary(15 * time.Second); err != nil {
			r.err = err
		}
	}
	if r.err != nil {
		if stop != nil {
			stop()
		}
		for _, w := range extra {
			w.close()
		}
		return r
	}
	for _, w := range watched {
		w.take() // the window starts now
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.duration)
	r.note = p.run(ctx)
	cancel()
	for _, w := range watched {
		r.seen.add(w.take())
	}
	if stop != nil {
		stop()
	}
	for _, w := range extra {
		w.close()
	}
	time.Sleep(time.Second) // the server settles before the next attack
	for _, w := range e.watched {
		w.take()
	}
	return r
}

func printTable(out *os.File, rows []row) {
	fmt.Fprintln(out, "| # | attack | canary worst RTT | locks lost | probes failed | /readyz failed | peak RSS | attack side |")
	fmt.Fprintln(out, "| ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |")
	for _, r := range rows {
		if r.err != nil {
			fmt.Fprintf(out, "| %d | %s | – | – | – | – | – | could not run: %v |\n", r.a.n, r.a.name, r.err)
			continue
		}
		fmt.Fprintf(out, "| %d | %s | %d ms | %d | %d of %d | %d of %d | %d MiB | %s |\n", r.a.n, r.a.name,
			r.seen.worstRTT.Milliseconds(), r.seen.canaryLost, r.seen.probesFailed, r.seen.probes,
			r.seen.readyFailed, r.seen.ready, r.seen.peakRSS>>20, r.note)
	}
}
