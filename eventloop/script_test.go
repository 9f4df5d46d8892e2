package eventloop

import (
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/monolock/monolock/locktable"
	"github.com/monolock/monolock/protocol"
	"github.com/monolock/monolock/protocol/admin"
)

// The loop's rules are written as scripts in testdata/rules/, one file per
// family, each case a conversation between clients and the real handler
// over fake connections and a clock that moves only when the script says
// so. Every command prints what the turns it caused did — the frames each
// peer was sent, the connections closed and why, the timers armed — under
// its "----", as etcd raft's interaction tests do; queries print the state
// they look at. The expected output is recorded in the files: a change of
// behaviour is a diff. After a deliberate change, regenerate and review:
//
//	go test -run TestRuleScripts ./eventloop/ -rewrite
//
// The README of testdata/rules lists the commands.
func TestRuleScripts(t *testing.T) {
	datadriven.Walk(t, filepath.Join("testdata", "rules"), func(t *testing.T, path string) {
		if filepath.Ext(path) != ".txt" {
			return
		}
		var sc *script
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			if sc == nil || sc.t != t { // each subtest is a case on a fresh server
				sc = newScript(t, Config{})
			}
			return sc.do(td)
		})
	})
}

// script is the state of one running case.
type script struct {
	t       *testing.T
	r       *rig
	metrics *fakeMetrics
	audit   *fakeAudit
	start   time.Duration // the owner's clock when the case began
	peers   map[string]*fakeConn
	names   map[*fakeConn]string
	t0      uint64 // the case's first token
	// absolute shows tokens as they are, not from t0: with Config.HA they
	// come from the blocks the script hands in.
	absolute bool
	ran      bool   // a command other than config has run
	joining  string // the peer connecting, until OnOpen returns

	log []string // what the current command's turns did, in order
}

func newScript(t *testing.T, cfg Config) *script {
	sc := &script{t: t}
	sc.reset(cfg)
	return sc
}

// reset starts the case afresh on a server configured by cfg.
func (sc *script) reset(cfg Config) {
	sc.metrics, sc.audit = &fakeMetrics{}, &fakeAudit{}
	cfg.Metrics, cfg.Audit = sc.metrics, sc.audit
	sc.peers, sc.names, sc.t0 = map[string]*fakeConn{}, map[*fakeConn]string{}, 0
	sc.r = newRig(sc.t, cfg)
	sc.r.watch = sc.heard
	sc.r.listener = sc.listener
	sc.start = sc.r.now()
	sc.absolute = cfg.HA != nil
}

// since is an owner offset as a time since the case began.
func (sc *script) since(at time.Duration) time.Duration { return at - sc.start }

// heard records a write to or the close of a peer.
func (sc *script) heard(c *fakeConn, wrote []byte, closed bool) {
	at := sc.since(offsetNow(sc.r.o)).String()
	name, ok := sc.names[c]
	if !ok {
		name = sc.joining
	}
	if closed {
		line := at + " " + name + " closed"
		if s := c.session(); s != nil {
			line += ": " + s.closeReason.String()
		}
		sc.log = append(sc.log, line)
		return
	}
	for _, f := range decodeAll(wrote) {
		sc.log = append(sc.log, at+" "+name+" ← "+sc.frameText(f))
	}
}

// tokenText shows a token relative to the case's first: t0, t0+N.
func (sc *script) tokenText(token uint64) string {
	if sc.absolute {
		return strconv.FormatUint(token, 10)
	}
	if token == sc.t0 {
		return "t0"
	}
	return fmt.Sprintf("t0%+d", int64(token-sc.t0))
}

func (sc *script) frameText(f protocol.Frame) string {
	switch f.Type {
	case protocol.TypeAcquired:
		if sc.t0 == 0 {
			sc.t0 = f.Token
		}
		return "ACQUIRED " + sc.tokenText(f.Token)
	case protocol.TypeWaiting:
		return "WAITING"
	case protocol.TypeError:
		return fmt.Sprintf("ERROR 0x%02x %s", uint8(f.Code), f.Reason)
	}
	return fmt.Sprintf("frame type 0x%02x", uint8(f.Type))
}

// do runs one command and returns what it printed: the log of its turns,
// then the timers it left armed differently, then its own answer.
func (sc *script) do(td *datadriven.TestData) string {
	if td.Cmd != "config" {
		sc.ran = true
	}
	before := sc.deadlines()
	wakes := sc.wakes()
	sc.log = sc.log[:0]
	answer := sc.run(td)
	out := compress(sc.log)
	for _, name := range sc.sorted() {
		c := sc.peers[name]
		switch n := c.wakes - wakes[c]; {
		case n == 1:
			out = append(out, name+" asked for another turn")
		case n > 1:
			out = append(out, fmt.Sprintf("%s asked for %d more turns", name, n))
		}
	}
	var armed []string
	for _, name := range sc.sorted() {
		c := sc.peers[name]
		s := c.session()
		if s == nil {
			continue
		}
		if at, ok := sc.r.o.wheel.Deadline(&s.timer); ok && (at != before[c]) {
			armed = append(armed, name+" "+sc.since(at).String())
		}
	}
	out = append(out, compressTimers(armed)...)
	if answer != "" {
		out = append(out, answer)
	}
	sc.log = sc.log[:0]
	return strings.Join(out, "\n")
}

func (sc *script) deadlines() map[*fakeConn]time.Duration {
	m := make(map[*fakeConn]time.Duration, len(sc.peers))
	for _, c := range sc.peers {
		if s := c.session(); s != nil {
			if at, ok := sc.r.o.wheel.Deadline(&s.timer); ok {
				m[c] = at
			}
		}
	}
	return m
}

func (sc *script) wakes() map[*fakeConn]int {
	m := make(map[*fakeConn]int, len(sc.peers))
	for _, c := range sc.peers {
		m[c] = c.wakes
	}
	return m
}

// sorted returns the peers' names in the order they connected.
func (sc *script) sorted() []string {
	names := make([]string, 0, len(sc.peers))
	for n := range sc.peers {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int { return sc.peers[a].port - sc.peers[b].port })
	return names
}

func (sc *script) fatalf(format string, args ...any) {
	sc.t.Helper()
	sc.t.Fatalf("%s (at %v)", fmt.Sprintf(format, args...), sc.since(sc.r.now()))
}

// args returns the command's arguments as written: "key" or "key=value".
func args(td *datadriven.TestData) []string {
	a := make([]string, len(td.CmdArgs))
	for i, arg := range td.CmdArgs {
		a[i] = arg.String()
	}
	return a
}

func (sc *script) run(td *datadriven.TestData) string {
	a := args(td)
	switch td.Cmd {
	case "config":
		if sc.ran {
			sc.fatalf("config must come first in a case")
		}
		cfg := Config{IOTimeout: sc.dur(sc.kv(a, "io", "1s"))}
		if slices.Contains(a, "ha") {
			cfg.HA = &HAConfig{TTL: sc.dur(sc.kv(a, "ttl", "5s")), Coordinator: sc}
		}
		sc.reset(cfg)
	case "advance":
		sc.r.run(sc.dur(sc.arg(a, 0)))
	case "at":
		at := sc.start + sc.dur(sc.arg(a, 0))
		if at < sc.r.now() {
			sc.fatalf("the clock is already past %v", sc.since(at))
		}
		sc.r.runTo(at)
	case "tick":
		sc.r.tick()
	case "wall":
		sc.r.clk.wall = sc.r.clk.wall.Add(sc.dur(sc.arg(a, 0)))
	case "connect":
		for _, name := range sc.expand(sc.arg(a, 0)) {
			sc.connect(name, sc.kv(a, "from", ""))
			sc.peers[name].id = sc.kv(a, "identity", "")
		}
	case "acquire":
		lock := sc.kv(a, "lock", "x")
		for i, name := range sc.expand(sc.arg(a, 0)) {
			if _, ok := sc.peers[name]; !ok {
				sc.connect(name, sc.kv(a, "from", ""))
			}
			spec := []string{"acquire", "lock=" + strings.ReplaceAll(lock, "{i}", fmt.Sprintf("%06d", i)), "lease=" + sc.kv(a, "lease", "far")}
			sc.r.send(sc.peers[name], sc.frame(spec))
		}
	case "send":
		for _, name := range sc.expand(sc.arg(a, 0)) {
			sc.r.send(sc.peer(name), sc.frame(a[1:]))
		}
	case "turn":
		sc.r.turn(sc.peer(sc.arg(a, 0)))
	case "close":
		_ = sc.peer(sc.arg(a, 0)).closeNow()
	case "peer":
		sc.setPeer(sc.peer(sc.arg(a, 0)), a[1:])
	case "force-release":
		var tok uint64
		var ok bool
		sc.admin(td, func() (err error) {
			tok, ok, err = sc.r.srv.ForceRelease(sc.t.Context(), sc.arg(a, 0), sc.kv(a, "operator", ""))
			return err
		})
		if !ok {
			return "=> none"
		}
		return "=> released " + sc.frameText(protocol.Frame{Type: protocol.TypeAcquired, Token: tok})[len("ACQUIRED "):]
	case "kick", "kick-search":
		var ok bool
		addr := sc.peer(sc.arg(a, 1)).RemoteAddr().String()
		calls := sc.admin(td, func() (err error) {
			ok, err = sc.r.srv.KickWaiter(sc.t.Context(), sc.arg(a, 0), addr, sc.kv(a, "operator", ""))
			return err
		})
		switch {
		case !ok:
			return "=> none"
		case td.Cmd == "kick-search":
			return fmt.Sprintf("=> kicked, in %d calls", calls)
		}
		return "=> kicked"
	case "evict":
		var evicted bool
		var wait time.Duration
		sc.admin(td, func() error {
			evicted, wait = sc.r.srv.evict()
			return nil
		})
		switch {
		case evicted:
			return "=> evicted"
		case wait == 0:
			return "=> none waits for its ACQUIRE"
		}
		return "=> none old enough, for " + wait.String()
	case "newcomer":
		var v verdict
		var wait time.Duration
		var alone bool
		waiting := sc.kv(a, "waiting", "")
		sc.admin(td, func() error {
			v, wait, alone = sc.r.srv.admitCall(sc.source(sc.kv(a, "from", "")), sc.source(waiting), waiting != "")
			return nil
		})
		switch v {
		case admitted:
			return "=> admitted"
		case refused:
			return "=> refused"
		}
		word := "waits"
		if v == tied {
			word = "tied: the one that sent something, else the newer, waits"
		}
		if alone {
			word += " (its source alone: the backlog keeps its order)"
		}
		if wait == 0 {
			return "=> " + word + ", for the back-off"
		}
		return "=> " + word + ", for " + wait.String()
	case "sources":
		return sc.sources()
	case "shutdown":
		sc.r.turnOf(func(o *owner) { o.shutdown() })
	case "read":
		var info admin.LockInfo
		var held bool
		calls := sc.admin(td, func() (err error) {
			info, held, err = sc.r.srv.Lock(sc.t.Context(), sc.arg(a, 0))
			return err
		})
		if !held {
			return fmt.Sprintf("=> idle, in %d calls", calls)
		}
		waiters := make([]string, len(info.Waiters))
		for i, w := range info.Waiters {
			waiters[i] = sc.byAddr(w.RemoteAddr)
		}
		return fmt.Sprintf("=> holder %s, %d waiters %s, in %d calls", sc.byAddr(info.Holder.RemoteAddr), len(waiters), ranges(waiters), calls)
	case "list":
		suffix := sc.kv(a, "suffix", "")
		limit, err := strconv.Atoi(sc.kv(a, "limit", "0"))
		if err != nil {
			sc.fatalf("list limit=: %v", err)
		}
		var page admin.LockList
		calls := sc.admin(td, func() (err error) {
			page, err = sc.r.srv.Locks(sc.t.Context(), admin.LockQuery{
				Match: func(name string) bool { return strings.HasSuffix(name, suffix) },
				After: sc.kv(a, "past", ""),
				Limit: limit,
			})
			return err
		})
		listed := page.Locks
		for i, l := range listed {
			if !strings.HasSuffix(l.Name, suffix) || (i > 0 && listed[i-1].Name >= l.Name) {
				return fmt.Sprintf("=> listed %q at %d: not matched, or not in order", l.Name, i)
			}
		}
		out := fmt.Sprintf("=> %d locks, each matched, in order, in %d calls", len(listed), calls)
		if limit > 0 || sc.kv(a, "past", "") != "" {
			first, last := "", ""
			if len(listed) > 0 {
				first, last = listed[0].Name, listed[len(listed)-1].Name
			}
			out += fmt.Sprintf("; %s..%s of %d, next %q", first, last, page.Total, page.Next)
		}
		return out
	case "state":
		return sc.state(sc.arg(a, 0))
	case "queue":
		return sc.queue(sc.arg(a, 0))
	case "counts":
		return fmt.Sprintf("sessions %d, timers %d", sc.r.o.sessions.len, sc.r.o.wheel.Len())
	case "stats":
		var st admin.Stats
		sc.admin(td, func() (err error) {
			st, err = sc.r.srv.Stats(sc.t.Context())
			return err
		})
		return fmt.Sprintf("=> locks %d, waiters %d, grants %d, expiries %d, newest token %s", st.Locks, st.Waiters, st.Grants, st.Expiries, sc.tokenText(st.NewestToken))
	case "metrics":
		return sc.metricsText()
	case "audit":
		return sc.auditText()
	default:
		out, ok := sc.runHA(td.Cmd, a)
		if !ok {
			sc.fatalf("unknown command %q", td.Cmd)
		}
		return out
	}
	return ""
}

// admin runs an admin call through the Server, one call per loop turn, and
// returns how many calls into the loop it took. The command's input, if
// any, is a command that runs right after the call its after=N names.
func (sc *script) admin(td *datadriven.TestData, fn func() error) (calls int) {
	hookAt := -1
	if td.HasArg("after") {
		td.ScanArgs(sc.t, "after", &hookAt)
	}
	start := sc.r.calls
	err := sc.r.call(fn, func(n int) {
		if n-start == hookAt {
			hookAt = -1
			line := strings.TrimSpace(td.Input)
			cmd, cmdArgs, err := datadriven.ParseLine(line)
			if err != nil {
				sc.fatalf("%v", err)
			}
			sc.run(&datadriven.TestData{Pos: td.Pos, Cmd: cmd, CmdArgs: cmdArgs})
		}
	})
	if err != nil {
		sc.fatalf("%v", err)
	}
	return sc.r.calls - start
}

// connect connects peer name from address from ("" for 192.0.2.1).
func (sc *script) connect(name, from string) {
	if _, ok := sc.peers[name]; ok {
		sc.fatalf("%s is connected already", name)
	}
	sc.r.conns = len(sc.peers) // ports follow the names' order
	sc.joining = name          // OnOpen may answer and close it at once
	sc.r.from = sc.ip(from)
	c := sc.r.connect()
	sc.r.from = nil
	sc.joining = ""
	sc.peers[name], sc.names[c] = c, name
}

// ip parses an address; "" is nil.
func (sc *script) ip(addr string) net.IP {
	if addr == "" {
		return nil
	}
	ip := net.ParseIP(addr)
	if ip == nil {
		sc.fatalf("bad address %q", addr)
	}
	return ip
}

// source is addr's source ("" for 192.0.2.1's, the default peers').
func (sc *script) source(addr string) sourceKey {
	if addr == "" {
		addr = "192.0.2.1"
	}
	return sourceOf(&net.TCPAddr{IP: sc.ip(addr)})
}

// sources lists the sources with sessions, with how many of them are not
// holders, the most first (ties by address), then the count the table
// keeps as the largest.
func (sc *script) sources() string {
	t := &sc.r.o.sessions.sources
	type row struct {
		addr  string
		count int
	}
	var rows []row
	for k, src := range t.byKey {
		if src.count != t.count(k) || src.sessions < src.count || (src.count > 0 && src.tail.src != src) {
			sc.fatalf("source %v: count %d of %d sessions, newest %v", netip.AddrFrom16(k).Unmap(), src.count, src.sessions, src.tail)
		}
		n := 0
		for s := src.head; s != nil; s = s.at[bySource].next {
			n++
		}
		if n != src.count {
			sc.fatalf("source %v counts %d and links %d", netip.AddrFrom16(k).Unmap(), src.count, n)
		}
		rows = append(rows, row{netip.AddrFrom16(k).Unmap().String(), src.count})
	}
	slices.SortFunc(rows, func(a, b row) int {
		if a.count != b.count {
			return b.count - a.count
		}
		return strings.Compare(a.addr, b.addr)
	})
	parts := make([]string, len(rows))
	for i, r := range rows {
		parts[i] = fmt.Sprintf("%s %d", r.addr, r.count)
	}
	if len(parts) == 0 {
		parts = []string{"none"}
	}
	return strings.Join(parts, ", ") + fmt.Sprintf("; most %d", t.most)
}

// expand turns NAME*N into NAME0 … NAME{N-1}.
func (sc *script) expand(name string) []string {
	base, n, ok := strings.Cut(name, "*")
	if !ok {
		return []string{name}
	}
	names := make([]string, sc.num(n))
	for i := range names {
		names[i] = base + strconv.Itoa(i)
	}
	return names
}

func (sc *script) peer(name string) *fakeConn {
	c, ok := sc.peers[name]
	if !ok {
		sc.fatalf("no connection %q", name)
	}
	return c
}

func (sc *script) byAddr(addr string) string {
	for n, c := range sc.peers {
		if c.addrOf().String() == addr {
			return n
		}
	}
	return "?" + addr
}

func (sc *script) arg(a []string, i int) string {
	if i >= len(a) {
		sc.fatalf("missing argument %d", i+1)
	}
	return a[i]
}

// kv returns the value of key=value among a, or def.
func (sc *script) kv(a []string, key, def string) string {
	for _, s := range a {
		if v, ok := strings.CutPrefix(s, key+"="); ok {
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
// each "heartbeat", "heartbeat*N", "release", "acquire lock=NAME lease=DUR|far" or
// "raw=HEX", and optionally cut to bytes=FROM:TO (either end may be left
// out).
func (sc *script) frame(a []string) []byte {
	if i := slices.Index(a, "+"); i >= 0 {
		return append(sc.frame(a[:i]), sc.frame(a[i+1:])...)
	}
	var b []byte
	switch what, n, _ := strings.Cut(sc.arg(a, 0), "*"); {
	case what == "heartbeat":
		count := 1
		if n != "" {
			count = sc.num(n)
		}
		b = heartbeats(count)
	case what == "release":
		b = protocol.AppendRelease(nil)
	case what == "acquire":
		lease := uint32(farLeaseMS)
		if l := sc.kv(a, "lease", "far"); l != "far" {
			lease = uint32(sc.dur(l) / ms)
		}
		b = protocol.AppendAcquire(nil, lease, sc.kv(a, "lock", "x"))
	case strings.HasPrefix(what, "raw="):
		var err error
		if b, err = hex.DecodeString(strings.TrimPrefix(what, "raw=")); err != nil {
			sc.fatalf("%v", err)
		}
	default:
		sc.fatalf("unknown frame %q", what)
	}
	if cut := sc.kv(a, "bytes", ""); cut != "" {
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
func (sc *script) setPeer(c *fakeConn, a []string) {
	for _, s := range a {
		switch {
		case s == "stuck":
			c.stuck = true
		case s == "drain":
			c.drain()
		case s == "fail-writes":
			c.failWrite = true
		case strings.HasPrefix(s, "pending="):
			c.pending = sc.num(strings.TrimPrefix(s, "pending="))
		case strings.HasPrefix(s, "kernel="):
			c.kernelQueued = sc.num(strings.TrimPrefix(s, "kernel="))
		case strings.HasPrefix(s, "acked+="):
			c.kernelAcked += uint64(sc.num(strings.TrimPrefix(s, "acked+=")))
		case strings.HasPrefix(s, "acked="):
			c.kernelAcked = uint64(sc.num(strings.TrimPrefix(s, "acked=")))
		default:
			sc.fatalf("unknown peer setting %q", s)
		}
	}
}

// state describes a session: its claim, its deadlines and its
// backpressure.
func (sc *script) state(name string) string {
	c := sc.peer(name)
	s := c.session()
	if s == nil {
		return name + ": closed"
	}
	var parts []string
	switch st := s.claim.State(); st {
	case locktable.Holding:
		parts = append(parts, "holding "+sc.frameText(protocol.Frame{Type: protocol.TypeAcquired, Token: s.claim.Token()})[len("ACQUIRED "):])
	case locktable.Waiting:
		parts = append(parts, "waiting")
	default:
		parts = append(parts, "no ACQUIRE")
	}
	if s.partialSince != 0 {
		parts = append(parts, "partial since "+sc.since(s.partialSince).String())
	}
	if s.stalledSince != 0 {
		parts = append(parts, "stalled since "+sc.since(s.stalledSince).String())
	}
	if s.backlogged {
		parts = append(parts, "backlogged")
	}
	parts = append(parts, fmt.Sprintf("unparsed %d", len(c.in)))
	if c.kernelLooks > 0 {
		parts = append(parts, fmt.Sprintf("kernel looked at %d times", c.kernelLooks))
	}
	if at, ok := sc.r.o.wheel.Deadline(&s.timer); ok {
		parts = append(parts, "timer "+sc.since(at).String())
	}
	return name + ": " + strings.Join(parts, ", ")
}

// queue describes a lock: its holder, then its waiters in order, or idle.
func (sc *script) queue(lock string) string {
	h := sc.r.o.table.Holder(lock)
	if h == nil {
		return lock + ": idle"
	}
	names := []string{sc.names[h.Value.conn.(*fakeConn)]}
	for w := range sc.r.o.table.Waiters(lock) {
		names = append(names, sc.names[w.Value.conn.(*fakeConn)])
	}
	return lock + ": " + names[0] + " holds; waiting: " + ranges(names[1:])
}

// metricsText lists what the loop counted, by name.
func (sc *script) metricsText() string {
	m := sc.metrics
	m.mu.Lock()
	defer m.mu.Unlock()
	var parts []string
	for name, n := range m.counts {
		parts = append(parts, fmt.Sprintf("%s %d", name, n))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// auditText prints the audit events recorded since the last audit command,
// one a line, naming whom each concerns by the peer whose address it
// carries ("no address" when it carries none), its identity and the
// operator who asked for it, if any.
func (sc *script) auditText() string {
	var lines []string
	for _, e := range sc.audit.take() {
		line := e.name + " " + e.lock
		if e.token != 0 {
			line += " " + sc.tokenText(e.token)
		}
		if e.remote == "" {
			line += " no address"
		} else {
			line += " " + sc.byAddr(e.remote)
		}
		if e.identity != "" {
			line += " identity=" + e.identity
		}
		if e.operator != "" {
			line += " operator=" + e.operator
		}
		if e.reason != "" {
			line += ": " + e.reason
		}
		lines = append(lines, line)
	}
	if len(lines) == 0 {
		return "no events"
	}
	return strings.Join(lines, "\n")
}

// compress joins consecutive log lines that differ only in a peer's
// number, counting up by one (w0 … w388 → w0..w388), and counts repeats of
// one line (×N).
func compress(lines []string) []string {
	var out []string
	for i := 0; i < len(lines); {
		j := i + 1
		for j < len(lines) && lines[j] == lines[i] {
			j++
		}
		if j-i > 1 {
			out = append(out, fmt.Sprintf("%s ×%d", lines[i], j-i))
			i = j
			continue
		}
		at, rest, _ := strings.Cut(lines[i], " ")
		name, event, _ := strings.Cut(rest, " ")
		base, n, ok := numbered(name)
		j = i + 1
		for ok && j < len(lines) {
			at2, rest2, _ := strings.Cut(lines[j], " ")
			name2, event2, _ := strings.Cut(rest2, " ")
			base2, n2, ok2 := numbered(name2)
			if !ok2 || at2 != at || base2 != base || n2 != n+(j-i) || !sameOrNextToken(event, event2, j-i) {
				break
			}
			j++
		}
		if j-i > 1 {
			if event2 := lines[j-1][strings.LastIndex(lines[j-1], " ")+1:]; event2 != event[strings.LastIndex(event, " ")+1:] {
				event += ".." + event2 // tokens counting up with the peers
			}
			out = append(out, fmt.Sprintf("%s %s%d..%s%d %s", at, base, n, base, n+j-i-1, event))
		} else {
			out = append(out, lines[i])
		}
		i = j
	}
	return out
}

// sameOrNextToken reports whether event b is event a, or a with its token
// (t0+K, last) d larger.
func sameOrNextToken(a, b string, d int) bool {
	if a == b {
		return true
	}
	pa, ka, oka := tokenAt(a)
	pb, kb, okb := tokenAt(b)
	return oka && okb && pa == pb && kb == ka+d
}

// tokenAt splits "... ACQUIRED t0+K" into its prefix and K.
func tokenAt(event string) (prefix string, k int, ok bool) {
	i := strings.LastIndex(event, " t0")
	if i < 0 {
		return "", 0, false
	}
	rest := event[i+3:]
	if rest == "" {
		return event[:i], 0, true
	}
	k, err := strconv.Atoi(rest)
	return event[:i], k, err == nil
}

// compressTimers prints the timers armed, one line, runs of numbered peers
// with the same deadline joined.
func compressTimers(armed []string) []string {
	if len(armed) == 0 {
		return nil
	}
	var lines []string
	for _, a := range armed {
		name, at, _ := strings.Cut(a, " ")
		lines = append(lines, "timer "+name+" "+at) // compress wants "TIME NAME EVENT"
	}
	var parts []string
	for _, l := range compress(lines) {
		_, rest, _ := strings.Cut(l, " ")
		parts = append(parts, rest)
	}
	return []string{"timers armed: " + strings.Join(parts, ", ")}
}

// ranges writes names, runs of numbered ones as NAMEi..NAMEj.
func ranges(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	var parts []string
	for i := 0; i < len(names); {
		base, n, ok := numbered(names[i])
		j := i + 1
		for ok && j < len(names) {
			b2, n2, ok2 := numbered(names[j])
			if !ok2 || b2 != base || n2 != n+(j-i) {
				break
			}
			j++
		}
		if j-i > 2 {
			parts = append(parts, fmt.Sprintf("%s%d..%s%d", base, n, base, n+j-i-1))
		} else {
			parts = append(parts, names[i:j]...)
		}
		i = j
	}
	return strings.Join(parts, " ")
}

// numbered splits w12 into w and 12.
func numbered(name string) (base string, n int, ok bool) {
	base = strings.TrimRight(name, "0123456789")
	if base == name || base == "" {
		return "", 0, false
	}
	n, err := strconv.Atoi(name[len(base):])
	return base, n, err == nil
}
