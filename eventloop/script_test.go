package eventloop

import (
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/monolock/monolock/internal/metrics"
	"github.com/monolock/monolock/locktable"
	"github.com/monolock/monolock/protocol"
)

// The owner's rules are written as scripts in testdata/rules/, one file per
// family, each a conversation with the owner over fake connections and a
// clock that moves only when the script says so. TestRuleScripts runs them;
// the README of that directory lists the commands. A script fails at its
// first expectation that does not hold, with the file and line.

func TestRuleScripts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "rules", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no rule scripts in testdata/rules: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			runScriptFile(t, file)
		})
	}
}

// scriptCase is one case of a script: its title and its lines.
type scriptCase struct {
	title string
	lines []scriptLine
}

type scriptLine struct {
	n    int
	text string
}

func runScriptFile(t *testing.T, file string) {
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var cases []scriptCase
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if j := strings.Index(line, "#"); j >= 0 {
			line = strings.TrimSpace(line[:j])
		}
		if line == "" {
			continue
		}
		if title, ok := strings.CutPrefix(line, "case "); ok {
			cases = append(cases, scriptCase{title: title})
			continue
		}
		if len(cases) == 0 {
			t.Fatalf("%s:%d: %q before the first case", file, i+1, line)
		}
		c := &cases[len(cases)-1]
		c.lines = append(c.lines, scriptLine{i + 1, line})
	}
	for _, c := range cases {
		t.Run(c.title, func(t *testing.T) {
			sc := newScript(t, file, Config{})
			for _, l := range c.lines {
				sc.line = l
				sc.do(l.text)
			}
		})
	}
}

// script is the state of one running case.
type script struct {
	t      *testing.T
	file   string
	line   scriptLine
	r      *rig
	reg    *prometheus.Registry
	start  time.Duration // the owner's clock when the case began
	peers  map[string]peer
	tokens map[string]uint64
	ran    bool // a command other than config has run

	// The last admin call read in pieces.
	calls  int        // calls into the loop it took
	read   LockInfo   // what read returned
	held   bool       // whether read found a holder
	listed []LockInfo // what list returned
}

func newScript(t *testing.T, file string, cfg Config) *script {
	reg := prometheus.NewRegistry()
	cfg.Metrics = metrics.New(reg)
	r := newRig(t, cfg)
	return &script{t: t, file: file, r: r, reg: reg, start: r.now(), peers: map[string]peer{}, tokens: map[string]uint64{}}
}

func (sc *script) fatalf(format string, args ...any) {
	sc.t.Helper()
	sc.t.Fatalf("%s:%d: %s: %s (at %v)", sc.file, sc.line.n, sc.line.text, fmt.Sprintf(format, args...), sc.r.now()-sc.start)
}

func (sc *script) do(text string) {
	f := strings.Fields(text)
	cmd, args := f[0], f[1:]
	if cmd != "config" {
		sc.ran = true
	}
	switch cmd {
	case "config":
		if sc.ran {
			sc.fatalf("config must come first in a case")
		}
		cfg := Config{}
		cfg.IOTimeout = sc.dur(sc.kv(args, "io", "1s"))
		*sc = *newScript(sc.t, sc.file, cfg)
	case "advance":
		sc.r.run(sc.dur(sc.arg(args, 0)))
	case "at":
		at := sc.start + sc.dur(sc.arg(args, 0))
		if at < sc.r.now() {
			sc.fatalf("the clock is already past %v", at-sc.start)
		}
		sc.r.runTo(at)
	case "tick":
		sc.r.tick()
	case "wall":
		sc.r.clk.wall = sc.r.clk.wall.Add(sc.dur(sc.arg(args, 0)))
	case "connect":
		if base, n, ok := strings.Cut(sc.arg(args, 0), "*"); ok { // NAME*N: NAME0 … NAME{N-1}
			for i := range sc.num(n) {
				sc.connect(base + strconv.Itoa(i))
			}
			return
		}
		sc.connect(args[0])
	case "acquire":
		name := sc.arg(args, 0)
		if base, n, ok := strings.Cut(name, "*"); ok { // NAME*N: NAME0 … NAME{N-1}, replies dropped
			lock := sc.kv(args, "lock", "x")
			for i := range sc.num(n) {
				p := base + strconv.Itoa(i)
				sc.connect(p)
				spec := []string{"acquire", "lock=" + strings.ReplaceAll(lock, "{i}", fmt.Sprintf("%06d", i)), "lease=" + sc.kv(args, "lease", "far")}
				sc.r.send(sc.peers[p].fakeConn, sc.frame(spec))
				sc.peers[p].takeReads()
			}
			return
		}
		if _, ok := sc.peers[name]; !ok {
			sc.connect(name)
		}
		sc.r.send(sc.peers[name].fakeConn, sc.frame(append([]string{"acquire"}, args[1:]...)))
	case "send":
		sc.r.send(sc.peer(sc.arg(args, 0)).fakeConn, sc.frame(args[1:]))
	case "turn":
		sc.r.turn(sc.peer(sc.arg(args, 0)).fakeConn)
	case "close":
		_ = sc.peer(sc.arg(args, 0)).closeNow()
	case "peer":
		sc.setPeer(sc.peer(sc.arg(args, 0)), args[1:])
	case "force-release":
		tok, ok, err := sc.r.server().ForceRelease(sc.t.Context(), sc.arg(args, 0))
		sc.result(ok, err, args[1:])
		if ok && len(args) > 1 && args[1] != "=>" {
			sc.fatalf("unexpected %q", args[1])
		}
		_ = tok
	case "kick":
		p := sc.peer(sc.arg(args, 1))
		ok, err := sc.r.server().KickWaiter(sc.t.Context(), sc.arg(args, 0), p.RemoteAddr().String())
		sc.result(ok, err, args[2:])
	case "evict": // evict => P | none | wait DUR
		var evicted bool
		var wait time.Duration
		sc.r.turnOf(func() { evicted, wait = sc.r.o.evictPending() })
		want := sc.arg(args, 1)
		switch {
		case want == "none" && (evicted || wait != 0):
			sc.fatalf("evicted %v, wait %v; want nobody to evict", evicted, wait)
		case want == "wait" && (evicted || wait != sc.dur(sc.arg(args, 2))):
			sc.fatalf("evicted %v, wait %v; want a wait of %s", evicted, wait, args[2])
		case want != "none" && want != "wait":
			if p := sc.peer(want); !evicted || !p.closed {
				sc.fatalf("evicted %v, %s closed %v; want %s evicted", evicted, want, p.closed, want)
			}
		}
	case "read", "list", "kick-search":
		sc.pieces(cmd, text)
	case "shutdown":
		sc.r.turnOf(sc.r.o.shutdown)
	case "join-late": // a connection that joins during shutdown is refused
		name := sc.arg(args, 0)
		c := &fakeConn{o: sc.r.o, keep: true, port: 1000 + len(sc.peers)}
		sc.r.o.refuse(c)
		sc.peers[name] = peer{fakeConn: c}
	case "expect":
		sc.expect(args)
	default:
		sc.fatalf("unknown command %q", cmd)
	}
}

// result checks an admin call's outcome: done, or "=> none" for a call that
// found nothing to act on.
func (sc *script) result(ok bool, err error, rest []string) {
	want := !slices.Equal(rest, []string{"=>", "none"})
	if err != nil || ok != want {
		sc.fatalf("ok %v, err %v; want ok %v", ok, err, want)
	}
}

func (sc *script) connect(name string) {
	if _, ok := sc.peers[name]; ok {
		sc.fatalf("%s is connected already", name)
	}
	sc.peers[name] = sc.r.peer()
}

func (sc *script) peer(name string) peer {
	p, ok := sc.peers[name]
	if !ok {
		sc.fatalf("no connection %q", name)
	}
	return p
}

func (sc *script) arg(args []string, i int) string {
	if i >= len(args) {
		sc.fatalf("missing argument %d", i+1)
	}
	return args[i]
}

// kv returns the value of key=value among args, or def.
func (sc *script) kv(args []string, key, def string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, key+"="); ok {
			return v
		}
	}
	return def
}

func (sc *script) dur(s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		sc.fatalf("%v", err)
	}
	return d
}

func (sc *script) num(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		sc.fatalf("%v", err)
	}
	return n
}

// frame encodes what a client sends in one segment: frames joined by "+",
// each "heartbeat", "heartbeat*N", "acquire lock=NAME lease=DUR|far" or
// "raw=HEX", and optionally cut to bytes=FROM:TO (either end may be left
// out).
func (sc *script) frame(args []string) []byte {
	if i := slices.Index(args, "+"); i >= 0 {
		return append(sc.frame(args[:i]), sc.frame(args[i+1:])...)
	}
	var b []byte
	switch what, n, _ := strings.Cut(sc.arg(args, 0), "*"); {
	case what == "heartbeat":
		count := 1
		if n != "" {
			count = sc.num(n)
		}
		b = heartbeats(count)
	case what == "acquire":
		lease := uint32(farLeaseMS)
		if l := sc.kv(args, "lease", "far"); l != "far" {
			lease = uint32(sc.dur(l) / ms)
		}
		b = protocol.AppendAcquire(nil, lease, sc.kv(args, "lock", "x"))
	case strings.HasPrefix(what, "raw="):
		var err error
		if b, err = hex.DecodeString(strings.TrimPrefix(what, "raw=")); err != nil {
			sc.fatalf("%v", err)
		}
	default:
		sc.fatalf("unknown frame %q", what)
	}
	if cut := sc.kv(args, "bytes", ""); cut != "" {
		from, to, _ := strings.Cut(cut, ":")
		lo, hi := 0, len(b)
		if from != "" {
			lo = sc.num(from)
		}
		if to != "" {
			hi = sc.num(to)
		}
		b = b[lo:hi]
	}
	return b
}

// setPeer changes how the fake peer behaves: "stuck" (reads nothing),
// "drain" (reads everything), "pending=N" (N bytes wait outbound),
// "fail-writes" (the next write fails), "kernel=N" (the kernel holds N bytes
// for it), "acked=N" and "acked+=N" (what it has acknowledged).
func (sc *script) setPeer(p peer, args []string) {
	for _, a := range args {
		switch {
		case a == "stuck":
			p.stuck = true
		case a == "drain":
			p.drain()
		case a == "fail-writes":
			p.failWrite = true
		case strings.HasPrefix(a, "pending="):
			p.pending = sc.num(strings.TrimPrefix(a, "pending="))
		case strings.HasPrefix(a, "kernel="): // bytes the kernel holds for the peer
			p.kernelQueued = sc.num(strings.TrimPrefix(a, "kernel="))
		case strings.HasPrefix(a, "acked+="): // the peer acknowledges more
			p.kernelAcked += uint64(sc.num(strings.TrimPrefix(a, "acked+=")))
		case strings.HasPrefix(a, "acked="):
			p.kernelAcked = uint64(sc.num(strings.TrimPrefix(a, "acked=")))
		default:
			sc.fatalf("unknown peer setting %q", a)
		}
	}
}

func (sc *script) expect(args []string) {
	subject := strings.TrimSuffix(sc.arg(args, 0), ":")
	rest := args[1:]
	switch subject {
	case "queue":
		sc.expectQueue(strings.TrimSuffix(sc.arg(rest, 0), ":"), rest[1:])
		return
	case "sessions":
		if n := sc.num(sc.arg(rest, 0)); sc.r.o.sessions.len != n {
			sc.fatalf("%d sessions, want %d", sc.r.o.sessions.len, n)
		}
		return
	case "timers":
		if n := sc.num(sc.arg(rest, 0)); sc.r.o.wheel.Len() != n {
			sc.fatalf("%d timers, want %d", sc.r.o.wheel.Len(), n)
		}
		return
	case "metric":
		sc.expectMetric(sc.arg(rest, 0), sc.arg(rest, 1))
		return
	case "closed": // how many of the case's connections are closed
		n := 0
		for _, p := range sc.peers {
			if p.closed {
				n++
			}
		}
		if want := sc.num(sc.arg(rest, 0)); n != want {
			sc.fatalf("%d connections closed, want %d", n, want)
		}
		return
	case "calls":
		if n := sc.num(sc.arg(rest, 0)); sc.calls != n {
			sc.fatalf("the last admin call took %d calls into the loop, want %d", sc.calls, n)
		}
		return
	case "read":
		sc.expectRead(rest)
		return
	case "listed":
		if n := sc.num(sc.arg(rest, 0)); len(sc.listed) != n {
			sc.fatalf("listed %d locks, want %d", len(sc.listed), n)
		}
		return
	}
	p := sc.peer(subject)
	what := sc.arg(rest, 0)
	switch what {
	case "alive":
		if p.closed || (p.s != nil && p.s.closed) {
			sc.fatalf("%s was closed at %v (%v)", subject, p.closedAt-sc.start, p.s.closeReason)
		}
	case "closed":
		reason := sc.arg(rest, 1)
		switch {
		case !p.closed:
			sc.fatalf("%s is open, want closed (%s)", subject, reason)
		case p.s != nil && p.s.closeReason.String() != reason:
			sc.fatalf("%s closed for %v, want %s", subject, p.s.closeReason, reason)
		}
		if at := sc.kv(rest[2:], "at", ""); at != "" && p.closedAt-sc.start != sc.dur(at) {
			sc.fatalf("%s closed at %v, want at %s", subject, p.closedAt-sc.start, at)
		}
	case "nothing":
		if fs := p.takeReads(); len(fs) != 0 {
			sc.fatalf("%s was sent %s, want nothing", subject, framesText(fs))
		}
	case "backlogged", "not-backlogged":
		if p.s.backlogged != (what == "backlogged") {
			sc.fatalf("%s: backlogged is %v", subject, p.s.backlogged)
		}
	case "unparsed":
		if n := sc.num(sc.arg(rest, 1)); len(p.in) != n {
			sc.fatalf("%s: %d bytes unparsed, want %d", subject, len(p.in), n)
		}
	case "stalled": // stalled since DUR
		if want := sc.dur(sc.arg(rest, 2)); p.s.stalledSince != sc.start+want {
			sc.fatalf("%s: stalled since %v, want %v", subject, p.s.stalledSince-sc.start, want)
		}
	case "not-stalled":
		if p.s.stalledSince != 0 {
			sc.fatalf("%s: stalled since %v", subject, p.s.stalledSince-sc.start)
		}
	case "partial": // partial since DUR: a frame began arriving then
		if want := sc.dur(sc.arg(rest, 2)); p.s.partialSince != sc.start+want {
			sc.fatalf("%s: partial since %v, want %v", subject, p.s.partialSince-sc.start, want)
		}
	case "not-partial":
		if p.s.partialSince != 0 {
			sc.fatalf("%s: partial since %v", subject, p.s.partialSince-sc.start)
		}
	case "granted": // granted when OTHER closed: in the same step
		o := sc.peer(sc.arg(rest, 2))
		if p.s.claim.State() != locktable.Holding || !o.closed || p.s.since != o.closedAt {
			sc.fatalf("%s: %v since %v; %s closed %v at %v", subject, p.s.claim.State(), p.s.since-sc.start, rest[2], o.closed, o.closedAt-sc.start)
		}
	case "kernel-looks":
		if n := sc.num(sc.arg(rest, 1)); p.kernelLooks != n {
			sc.fatalf("%s: %d looks at the kernel's send queue, want %d", subject, p.kernelLooks, n)
		}
	case "wakes":
		if n := sc.num(sc.arg(rest, 1)); p.wakes != n {
			sc.fatalf("%s: %d Wake calls, want %d", subject, p.wakes, n)
		}
	case "timer":
		due, ok := sc.r.o.wheel.Deadline(&p.s.timer)
		if want := sc.dur(sc.arg(rest, 2)); !ok || due-sc.start != want { // timer at DUR
			sc.fatalf("%s: timer due at %v (armed %v), want %v", subject, due-sc.start, ok, want)
		}
	default:
		sc.expectFrames(subject, p, strings.Split(strings.Join(rest, " "), ","))
	}
}

// expectFrames consumes the frames p was sent and checks them against
// wants: "acquired", "acquired T", "acquired > T", each of them ending in
// "as U" to name the token U,
// "waiting", "error 0xNN", each optionally repeated ("acquired*100 T").
func (sc *script) expectFrames(subject string, p peer, wants []string) {
	fs := p.takeReads()
	i := 0
	for _, w := range wants {
		f := strings.Fields(w)
		kind, n, _ := strings.Cut(sc.arg(f, 0), "*")
		count := 1
		if n != "" {
			count = sc.num(n)
		}
		for range count {
			if i >= len(fs) {
				sc.fatalf("%s was sent %s, want %s", subject, framesText(fs), strings.Join(wants, ","))
			}
			sc.checkFrame(subject, p, fs[i], kind, f[1:])
			i++
		}
	}
	if i != len(fs) {
		sc.fatalf("%s was sent %s, %d more than %s", subject, framesText(fs), len(fs)-i, strings.Join(wants, ","))
	}
}

func (sc *script) checkFrame(subject string, p peer, f protocol.Frame, kind string, args []string) {
	switch kind {
	case "waiting":
		if f.Type != protocol.TypeWaiting {
			sc.fatalf("%s got %s, want WAITING", subject, frameText(f))
		}
	case "error":
		code, err := strconv.ParseUint(strings.TrimPrefix(sc.arg(args, 0), "0x"), 16, 8)
		if err != nil {
			sc.fatalf("%v", err)
		}
		if f.Type != protocol.TypeError || f.Code != protocol.Code(code) {
			sc.fatalf("%s got %s, want ERROR %s", subject, frameText(f), args[0])
		}
	case "acquired":
		if f.Type != protocol.TypeAcquired {
			sc.fatalf("%s got %s, want ACQUIRED", subject, frameText(f))
		}
		if n := len(args); n >= 2 && args[n-2] == "as" {
			if prev, ok := sc.tokens[args[n-1]]; ok && prev != f.Token {
				sc.fatalf("%s is %d already", args[n-1], prev)
			}
			sc.tokens[args[n-1]] = f.Token
			args = args[:n-2]
		}
		switch {
		case len(args) == 0:
		case len(args) == 2 && args[0] == ">":
			if f.Token <= sc.token(args[1]) {
				sc.fatalf("%s got ACQUIRED(%d), want a token above %s (%d)", subject, f.Token, args[1], sc.token(args[1]))
			}
			if p.s.claim.State() != locktable.Holding || p.s.claim.Token() != f.Token {
				sc.fatalf("%s was sent ACQUIRED(%d) but its claim is %v with token %d", subject, f.Token, p.s.claim.State(), p.s.claim.Token())
			}
		case len(args) == 1:
			if f.Token != sc.token(args[0]) {
				sc.fatalf("%s got ACQUIRED(%d), want %s (%d)", subject, f.Token, args[0], sc.token(args[0]))
			}
		default:
			sc.fatalf("bad expectation %q", args)
		}
	default:
		sc.fatalf("unknown expectation %q", kind)
	}
}

func (sc *script) token(name string) uint64 {
	tok, ok := sc.tokens[name]
	if !ok {
		sc.fatalf("no token %q", name)
	}
	return tok
}

// expectQueue checks a lock's holder and waiters in order, or "idle".
func (sc *script) expectQueue(lock string, want []string) {
	var got []string
	name := func(s *session) string {
		for n, p := range sc.peers {
			if p.s == s {
				return n
			}
		}
		return "?"
	}
	if h := sc.r.o.table.Holder(lock); h != nil {
		got = append(got, name(h.Value))
		for c := range sc.r.o.table.Waiters(lock) {
			got = append(got, name(c.Value))
		}
	} else {
		got = []string{"idle"}
	}
	if !slices.Equal(got, want) {
		sc.fatalf("queue of %q is %v, want %v", lock, got, want)
	}
}

// expectMetric checks a counter or gauge: name or name{label=value}.
func (sc *script) expectMetric(series, want string) {
	name, labels, _ := strings.Cut(strings.TrimSuffix(series, "}"), "{")
	lk, lv, _ := strings.Cut(labels, "=")
	families, err := sc.reg.Gather()
	if err != nil {
		sc.fatalf("%v", err)
	}
	got := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.Metric {
			match := lk == ""
			for _, l := range m.Label {
				match = match || (l.GetName() == lk && l.GetValue() == lv)
			}
			if match {
				got += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	if strconv.FormatFloat(got, 'f', -1, 64) != want {
		sc.fatalf("%s = %v, want %s", series, got, want)
	}
}

// pieces runs an admin call that the server serves in calls of bounded size
// (read LOCK, list suffix=S, kick-search LOCK P), one call per loop turn,
// and runs the script commands after ", after call N:" between the turns.
func (sc *script) pieces(cmd, text string) {
	call, hook, _ := strings.Cut(text, ",")
	args := strings.Fields(call)[1:]
	hookAt := -1
	if hook = strings.TrimSpace(hook); hook != "" {
		spec, hookCmd, ok := strings.Cut(hook, ":")
		n, found := strings.CutPrefix(spec, "after call ")
		if !ok || !found {
			sc.fatalf("want \", after call N: COMMAND\"")
		}
		hookAt, hook = sc.num(n), strings.TrimSpace(hookCmd)
	}
	wakes := make(chan struct{}, 4)
	srv := &Server{handler: &handler{owner: sc.r.o}}
	srv.calls = newCallQueue(func() { wakes <- struct{}{} })
	done := make(chan error, 1)
	ctx := sc.t.Context()
	switch cmd {
	case "read":
		lock := sc.arg(args, 0)
		go func() {
			var err error
			sc.read, sc.held, err = srv.Lock(ctx, lock)
			done <- err
		}()
	case "list":
		suffix := sc.kv(args, "suffix", "")
		go func() {
			var err error
			sc.listed, err = srv.Locks(ctx, func(name string) bool { return strings.HasSuffix(name, suffix) })
			done <- err
		}()
	case "kick-search":
		lock, addr := sc.arg(args, 0), sc.peer(sc.arg(args, 1)).RemoteAddr().String()
		go func() {
			ok, err := srv.KickWaiter(ctx, lock, addr)
			if err == nil && !ok {
				err = fmt.Errorf("%s is not a waiter of %s", args[1], lock)
			}
			done <- err
		}()
	}
	sc.calls = 0
	for {
		select {
		case <-wakes:
			srv.calls.turn(sc.r.o.tick, func(c *loopCall) { sc.calls++; sc.r.o.runCall(c) })
			if sc.calls == hookAt {
				hookAt = -1
				sc.do(hook)
			}
		case err := <-done:
			if err != nil {
				sc.fatalf("%v", err)
			}
			if cmd == "list" {
				for i, l := range sc.listed {
					if !strings.HasSuffix(l.Name, sc.kv(args, "suffix", "")) || (i > 0 && sc.listed[i-1].Name >= l.Name) {
						sc.fatalf("listed %q at %d: not matched, or not in order", l.Name, i)
					}
				}
			}
			return
		}
	}
}

// expectRead checks what the last read returned: "holder P waiters P Q …",
// where NAMEi..NAMEj stands for NAMEi to NAMEj, or "idle".
func (sc *script) expectRead(want []string) {
	if slices.Equal(want, []string{"idle"}) {
		if sc.held {
			sc.fatalf("read found a holder, want an idle lock")
		}
		return
	}
	if len(want) < 3 || want[0] != "holder" || want[2] != "waiters" {
		sc.fatalf("want \"expect read: holder P waiters …\"")
	}
	if h := sc.peer(want[1]); !sc.held || sc.read.Holder.RemoteAddr != h.RemoteAddr().String() {
		sc.fatalf("read holder %q (held %v), want %s", sc.read.Holder.RemoteAddr, sc.held, want[1])
	}
	var addrs []string
	for _, w := range want[3:] {
		from, to, ok := strings.Cut(w, "..")
		if !ok {
			addrs = append(addrs, sc.peer(w).RemoteAddr().String())
			continue
		}
		base := strings.TrimRight(from, "0123456789")
		lo, hi := sc.num(from[len(base):]), sc.num(strings.TrimPrefix(to, base))
		for i := lo; i <= hi; i++ {
			addrs = append(addrs, sc.peer(base+strconv.Itoa(i)).RemoteAddr().String())
		}
	}
	got := make([]string, len(sc.read.Waiters))
	for i, w := range sc.read.Waiters {
		got[i] = w.RemoteAddr
	}
	if !slices.Equal(got, addrs) {
		sc.fatalf("read %d waiters %v…, want %d", len(got), got[:min(len(got), 3)], len(addrs))
	}
}
