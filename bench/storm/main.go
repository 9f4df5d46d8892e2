// Command storm measures a reconnect storm (`make storm`): a fleet of
// sessions queued on one monolock is told to leave (SIGTERM, ERROR 0x01) and
// re-admitted by a second one that is already running, as after a failover
// to a standby or a restart behind a moving address. On loopback, for plain
// TCP and for mutual TLS, and for mutual TLS both with full handshakes and
// with sessions resumed from tickets the second server can open
// (-tls-ticket-keys shared by the two), each with and without the client's
// reconnect jitter. It reports the time from the SIGTERM until each client
// holds or queues again (p50, p99, max), the second server's CPU per
// admission (user + system time from /proc, over the storm), how many
// handshakes resumed, the clients' failed attempts and the server's accept
// and handshake errors.
//
// Sizes adapt to the descriptor hard limit (ulimit -Hn): each server holds
// every session at once, and the clients are split over several processes.
package main

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/monolock/monolock/internal/certs/certstest"
	"github.com/monolock/monolock/internal/testsupport/fdbudget"
	"github.com/monolock/monolock/internal/testsupport/proc"
)

type config struct {
	server  string
	plain   int
	mtls    int
	perProc int
	lease   time.Duration
	results string
}

// stormCase is one row of the table.
type stormCase struct {
	name   string
	n      int
	tls    bool
	resume bool // the servers share -tls-ticket-keys
	jitter bool
}

type result struct {
	stormCase
	p50, p99, max   time.Duration
	cpuPerAdmission time.Duration
	resumed         int64
	dialErrors      int64
	acceptErrors    float64
	tlsErrors       float64
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "clients" {
		if err := runClients(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "storm clients:", err)
			os.Exit(2)
		}
		return
	}
	os.Exit(run(os.Args[1:], os.Stdout))
}

func run(args []string, stdout io.Writer) int {
	var c config
	fs := flag.NewFlagSet("storm", flag.ContinueOnError)
	fs.StringVar(&c.server, "server", filepath.Join("..", "bin", "monolock"), "server binary")
	fs.IntVar(&c.plain, "plain", 15000, "plain TCP sessions (lowered to fit the descriptor hard limit)")
	fs.IntVar(&c.mtls, "mtls", 5000, "mutual-TLS sessions (lowered to fit the descriptor hard limit)")
	fs.IntVar(&c.perProc, "per-process", 8000, "clients per client process")
	fs.DurationVar(&c.lease, "lease", time.Minute, "the clients' lease (jitter: up to min(1s, lease/4))")
	fs.StringVar(&c.results, "results", "", "also write the table as Markdown to this file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	_, hard, err := fdbudget.Limits()
	if err != nil {
		fmt.Fprintln(os.Stderr, "storm:", err)
		return 2
	}
	// A server holds every session, plus its listeners, logs and the
	// runtime's own descriptors.
	notes := []string{}
	for _, n := range []*int{&c.plain, &c.mtls} {
		if fit := fdbudget.Room(hard, *n, 1, 200); fit < *n {
			notes = append(notes, fmt.Sprintf("%d sessions lowered to %d to fit the descriptor hard limit %d", *n, fit, hard))
			*n = fit
		}
	}
	c.perProc = fdbudget.Room(hard, c.perProc, 1, 500)
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "storm:", err)
		return 2
	}
	dir, err := os.MkdirTemp("", "monolock-storm-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "storm:", err)
		return 2
	}
	defer os.RemoveAll(dir)
	pkiDir := filepath.Join(dir, "pki")
	if err := os.Mkdir(pkiDir, 0o700); err != nil {
		fmt.Fprintln(os.Stderr, "storm:", err)
		return 2
	}
	pki, err := certstest.Generate(pkiDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "storm:", err)
		return 2
	}
	keys := filepath.Join(dir, "tickets")
	if err := writeTicketKey(keys); err != nil {
		fmt.Fprintln(os.Stderr, "storm:", err)
		return 2
	}
	cases := []stormCase{
		{"plain", c.plain, false, false, false},
		{"plain, jitter", c.plain, false, false, true},
		{"mTLS, full handshakes", c.mtls, true, false, false},
		{"mTLS, resumed", c.mtls, true, true, false},
		{"mTLS, full handshakes, jitter", c.mtls, true, false, true},
		{"mTLS, resumed, jitter", c.mtls, true, true, true},
	}
	var results []result
	for _, sc := range cases {
		fmt.Fprintf(stdout, "storm: %s, %d sessions ...\n", sc.name, sc.n)
		r, err := runCase(c, sc, self, dir, pki, keys)
		if err != nil {
			fmt.Fprintf(os.Stderr, "storm: %s: %v\n", sc.name, err)
			return 1
		}
		results = append(results, r)
	}
	table := render(results, c, notes)
	fmt.Fprint(stdout, "\n"+table)
	if c.results != "" {
		if err := os.WriteFile(c.results, []byte(table), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "storm:", err)
			return 2
		}
	}
	return 0
}

func writeTicketKey(path string) error {
	var k [32]byte
	if _, err := rand.Read(k[:]); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(k[:])+"\n"), 0o600)
}

func runCase(c config, sc stormCase, self, dir string, pki *certstest.PKI, keys string) (result, error) {
	r := result{stormCase: sc}
	args := []string{"-ops-listen", "127.0.0.1:0"}
	if sc.tls {
		args = append(args, "-tls-cert", pki.Server.Cert, "-tls-key", pki.Server.Key, "-tls-client-ca", pki.CA)
	}
	if sc.resume {
		args = append(args, "-tls-ticket-keys", keys)
	}
	start := func(name string) (*proc.Process, error) {
		return proc.Monolock(c.server, proc.Options{Name: name, Args: args, LogFile: filepath.Join(dir, name+".log"), StopGrace: 10 * time.Second})
	}
	first, err := start("first")
	if err != nil {
		return r, err
	}
	defer first.Kill()
	second, err := start("second")
	if err != nil {
		return r, err
	}
	defer second.Kill()

	var procs []*proc.Child
	defer func() {
		for _, p := range procs {
			p.Kill()
		}
	}()
	for off := 0; off < sc.n; off += c.perProc {
		cargs := []string{"clients", "-first", first.Addr, "-then", second.Addr, "-n", strconv.Itoa(min(c.perProc, sc.n-off)),
			"-offset", strconv.Itoa(off), "-lease", c.lease.String(), "-jitter=" + strconv.FormatBool(sc.jitter)}
		if sc.tls {
			pair := pki.Clients[certstest.ClientURI]
			cargs = append(cargs, "-ca", pki.CA, "-cert", pair.Cert, "-key", pair.Key)
		}
		p, err := proc.StartChild(self, proc.ChildOptions{Name: "a client process", Args: cargs, Stderr: os.Stderr})
		if err != nil {
			return r, err
		}
		procs = append(procs, p)
	}
	for _, p := range procs {
		if _, err := p.Await("ready", 5*time.Minute); err != nil {
			return r, err
		}
	}
	cpu0, err := proc.CPUTime(second.Pid())
	if err != nil {
		return r, err
	}
	t0 := time.Now()
	if err := first.Signal(syscall.SIGTERM); err != nil {
		return r, err
	}
	var answered []time.Duration
	for _, p := range procs {
		line, err := p.Await("done ", 5*time.Minute)
		if err != nil {
			return r, err
		}
		var s summary
		if err := json.Unmarshal([]byte(strings.TrimPrefix(line.Text, "done ")), &s); err != nil {
			return r, err
		}
		for _, at := range s.Answered {
			answered = append(answered, time.Unix(0, at).Sub(t0))
		}
		r.resumed += s.Resumed
		r.dialErrors += s.DialErrors
	}
	cpu1, err := proc.CPUTime(second.Pid())
	if err != nil {
		return r, err
	}
	slices.Sort(answered)
	r.p50, r.p99, r.max = quantile(answered, 0.5), quantile(answered, 0.99), answered[len(answered)-1]
	r.cpuPerAdmission = (cpu1 - cpu0) / time.Duration(len(answered))
	metrics, err := scrape(second.OpsAddr)
	if err != nil {
		return r, err
	}
	var ok1, ok2 bool
	r.acceptErrors, ok1 = metrics["monolock_accept_errors_total"]
	r.tlsErrors, ok2 = metrics["monolock_tls_handshake_errors_total"]
	if !ok1 || !ok2 {
		return r, errors.New("the second server's /metrics lacks monolock_accept_errors_total or monolock_tls_handshake_errors_total")
	}
	return r, nil
}

// scrape reads the unlabelled samples of the server's /metrics.
func scrape(ops string) (map[string]float64, error) {
	resp, err := http.Get("http://" + ops + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && !strings.HasPrefix(f[0], "#") {
			if v, err := strconv.ParseFloat(f[1], 64); err == nil {
				out[f[0]] = v
			}
		}
	}
	return out, sc.Err()
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

func render(rs []result, c config, notes []string) string {
	var b strings.Builder
	fmt.Fprintln(&b, "| case | sessions | all holding or queued again: p50 | p99 | max | server CPU per admission | resumed | client retries | accept errors | TLS handshake errors |")
	fmt.Fprintln(&b, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, r := range rs {
		resumed := "—"
		if r.tls {
			resumed = fmt.Sprintf("%d of %d", r.resumed, r.n)
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | %d | %.0f | %.0f |\n", r.name, r.n,
			ms(r.p50), ms(r.p99), ms(r.max), us(r.cpuPerAdmission), resumed, r.dialErrors, r.acceptErrors, r.tlsErrors)
	}
	fmt.Fprintf(&b, "\nLoopback; the fleet queued on one server (%d lock names, lease %v) is sent ERROR 0x01 by SIGTERM and reconnects to a second, already running server; times from the SIGTERM. Jitter: a uniform wait in [0, min(1s, lease/4)] before reconnecting, as the Go client's DoRetry does. Server CPU: user + system time of the second server over the storm, divided by the sessions admitted (10 ms ticks). Client processes of at most %d clients each.\n",
		500, c.lease, c.perProc)
	for _, n := range notes {
		fmt.Fprintln(&b, "\nNote:", n)
	}
	return b.String()
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }
func us(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond)) }
