//go:build linux

// Package docs_test runs the shell commands of README.md and docs/*.md
// against binaries built from this tree, so that a renamed flag, a changed
// message or exit status, or a wrong example fails `go test ./...`.
//
// Every ```sh block in those files carries a marker on the line before it:
//
//	<!-- doctest: NAME [server] [background] [repo] -->   run the block
//	<!-- doctest: skip REASON -->                          do not run it (reported as a skipped test)
//
// A sh block without a marker fails the test, so no command is left unchecked
// by accident. Blocks with the same NAME in one file form one script: they run
// in document order in one scratch directory ($WORK), sharing environment
// variables, shell functions, files and background processes. Each script is
// turned into a testscript (github.com/rogpeppe/go-internal/testscript) and
// run by it; scripts run in parallel. Options:
//
//   - server: start bin/monolock in the background before the block and
//     wait until it listens, for blocks whose prose says to run the server
//     in another terminal first (`make run`), where the reader sees it start;
//   - background: start every command of the block in the background (servers
//     that run until stopped);
//   - repo: run the block in the repository root instead of $WORK (go test);
//   - postgres: start a throwaway PostgreSQL (internal/testsupport/testdb)
//     before the block and put its URL in DATABASE_URL, for blocks whose
//     text says DATABASE_URL names the reader's database.
//
// Inside a block, one shell command (with its continuation lines, here
// documents and multi-line function bodies) becomes one testscript command:
//
//   - a command runs as `exec bash -c 'COMMAND'` and must exit 0, unless its
//     trailing comment starts with `exit N` (as in `... # exit 2: denied`),
//     which makes N the required status;
//   - lines starting with `#>` right after a command are text its stdout or
//     stderr must contain (`...` matches anything);
//   - a command that ends in `&` (or starts jobs, as a loop with `cmd &` in it
//     does) starts in the background, under a helper that stops its whole
//     process group at the end of the script; `wait "$X"` after `X=$!` waits
//     for it and requires exit status 0 (and `#>` lines check its output).
//     Nothing is inserted after it: a block that starts a server waits for it
//     as a reader would, with a command the document shows;
//   - NAME=VALUE sets NAME for the commands after it (bash evaluates VALUE);
//     `cd DIR` changes the directory; shell functions are defined for every
//     later command (through BASH_ENV);
//   - `make build` is done already: $WORK/bin holds monolock and monolockctl
//     built from this tree, so `bin/monolockctl` and `./bin/monolock` work as
//     in the repository root.
//
// Addresses: tests never listen on fixed ports. The documents use the
// defaults 127.0.0.1:7070 (protocol), 7071 (admin API), 9090 (ops) and 7443
// (the TLS walk-through). Each script gets free ports instead: every
// "127.0.0.1:7070" in a command is replaced by "127.0.0.1:${DOCTEST_7070}"
// (and likewise for the others; expected output is taken as written), bash
// expands it,
// and MONOLOCK_LISTEN_ADDRESS, MONOLOCK_ADDRESS and MONOLOCK_ADMIN_ADDRESS
// point the defaults there, so `bin/monolock` and `bin/monolockctl` without
// address flags meet on the free port as they would on 7070. "/tmp/" in a
// command becomes the script's own temporary directory. Nothing else is
// rewritten.
package docs_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/monolock/monolock/internal/testsupport/proc"
	"github.com/monolock/monolock/internal/testsupport/testdb"
	"github.com/rogpeppe/go-internal/testscript"
)

// repoRoot is the repository root (the parent of docs/).
var repoRoot = func() string {
	dir, err := filepath.Abs("..")
	if err != nil {
		panic(err)
	}
	return dir
}()

// documents lists the files whose sh blocks are checked.
func documents(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join(repoRoot, "README.md")}, docs...)
}

// ports are the documented default ports, each replaced by a free one.
var ports = []string{"7070", "7071", "9090", "7443"}

// tools are the programs outside this repository a command may need; a script
// that uses one that is missing is skipped, saying so.
var tools = []string{"curl", "jq", "python3", "node", "openssl", "psql", "cargo", "java"}

func TestDocs(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed; the documented commands are shell commands")
	}
	var scripts []*script
	for _, path := range documents(t) {
		parsed, skipped, err := parseDocument(path)
		if err != nil {
			t.Fatal(err)
		}
		scripts = append(scripts, parsed...)
		for _, s := range skipped {
			t.Run("skip "+s.where, func(t *testing.T) { t.Skip(s.reason) })
		}
	}
	bin := buildBinaries(t)
	dir := t.TempDir()
	var files []string
	for _, s := range scripts {
		archive, err := s.txtar()
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, s.name+".txtar")
		if err := os.WriteFile(file, []byte(archive), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, file)
	}
	goEnv := goEnvironment(t)
	given := &givenPorts{ports: map[string]bool{}}
	testscript.Run(t, testscript.Params{
		Files: files,
		Setup: func(env *testscript.Env) error {
			if err := os.Symlink(bin, filepath.Join(env.WorkDir, "bin")); err != nil {
				return err
			}
			for _, p := range ports {
				port, err := given.free()
				if err != nil {
					return err
				}
				env.Setenv("DOCTEST_"+p, port)
			}
			env.Setenv("MONOLOCK_LISTEN_ADDRESS", "127.0.0.1:"+env.Getenv("DOCTEST_7070"))
			env.Setenv("MONOLOCK_ADDRESS", "127.0.0.1:"+env.Getenv("DOCTEST_7070"))
			env.Setenv("MONOLOCK_ADMIN_ADDRESS", "127.0.0.1:"+env.Getenv("DOCTEST_7071"))
			env.Setenv("BASH_ENV", filepath.Join(env.WorkDir, ".doctest", "prelude.sh"))
			env.Setenv("REPO", repoRoot)
			for k, v := range goEnv {
				env.Setenv(k, v)
			}
			for k, v := range cargoEnvironment() {
				env.Setenv(k, v)
			}
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"status":   cmdStatus,
			"out":      cmdOut,
			"ready":    cmdReady,
			"shset":    cmdShset,
			"pid":      cmdPid,
			"postgres": cmdPostgres,
		},
	})
}

// buildBinaries builds monolock and monolockctl from this tree, once, as
// make build does (CGO_ENABLED=0).
func buildBinaries(t *testing.T) string {
	t.Helper()
	dir, err := proc.Build(proc.Spec{Pkgs: []string{"./cmd/monolock", "./cmd/monolockctl"}, Env: []string{"CGO_ENABLED=0"}})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestMain(m *testing.M) {
	// Main makes the test binary double as the pgroup command of the scripts
	// (it runs itself as that command when a script calls it).
	testscript.Main(mainWithCleanup{m}, map[string]func(){"pgroup": func() { os.Exit(pgroupMain()) }})
}

type mainWithCleanup struct{ m *testing.M }

func (w mainWithCleanup) Run() int {
	code := w.m.Run()
	proc.Cleanup()
	return code
}

// pgroupMain runs its arguments as a command in a process group of its own,
// passes SIGINT and SIGTERM on to the whole group, and exits when every
// process of the group has, with the command's status. Background commands
// run under it: testscript stops a background command at the end of a script
// by interrupting the process it started, and a shell neither passes that on
// to the programs it runs (a pipeline, the jobs of a loop) nor waits for the
// jobs it leaves. As a child subreaper, pgroup inherits those jobs and waits
// for them; whatever is left a few seconds after the signal is killed.
func pgroupMain() int {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: pgroup program [args...]")
		return 2
	}
	const prSetChildSubreaper = 36
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		fmt.Fprintln(os.Stderr, "pgroup: prctl:", errno)
		return 127
	}
	path, err := exec.LookPath(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgroup:", err)
		return 127
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	p, err := os.StartProcess(path, os.Args[1:], &os.ProcAttr{
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgroup:", err)
		return 127
	}
	group := -p.Pid
	go func() {
		sig := <-sigs
		_ = syscall.Kill(group, sig.(syscall.Signal))
		time.Sleep(5 * time.Second)
		_ = syscall.Kill(group, syscall.SIGKILL)
	}()
	var main syscall.WaitStatus
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil { // ECHILD: the command and every job it left are gone
			break
		}
		if pid == p.Pid {
			main = ws
		}
	}
	if main.Signaled() {
		return 128 + int(main.Signal())
	}
	return main.ExitStatus()
}

// goEnvironment passes the go command's caches on to scripts, whose HOME is
// not a real one.
func goEnvironment(t *testing.T) map[string]string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE", "GOPATH", "GOPROXY", "GOFLAGS", "GOTOOLCHAIN").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	names := []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOPROXY", "GOFLAGS", "GOTOOLCHAIN"}
	env := map[string]string{}
	for i, v := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if i < len(names) && v != "" {
			env[names[i]] = v
		}
	}
	return env
}

// cargoEnvironment passes cargo's and rustup's homes (the toolchain, the
// crates already downloaded) on to scripts, whose HOME is not a real one.
func cargoEnvironment() map[string]string {
	env := map[string]string{}
	home, _ := os.UserHomeDir()
	for name, dir := range map[string]string{"CARGO_HOME": ".cargo", "RUSTUP_HOME": ".rustup"} {
		if v := os.Getenv(name); v != "" {
			env[name] = v
		} else if home != "" {
			env[name] = filepath.Join(home, dir)
		}
	}
	return env
}

// givenPorts are the loopback ports handed to the scripts of one run.
type givenPorts struct {
	mu    sync.Mutex
	ports map[string]bool
}

// free returns a loopback port that is free now and was not handed to
// another script of this run (scripts run in parallel).
func (g *givenPorts) free() (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		_, port, err := net.SplitHostPort(ln.Addr().String())
		_ = ln.Close()
		if err != nil {
			return "", err
		}
		if !g.ports[port] {
			g.ports[port] = true
			return port, nil
		}
	}
}

// --- the commands scripts use besides testscript's own ---------------------

// status N PROG ARGS... runs PROG like exec and requires exit status N.
func cmdStatus(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: status N program [args...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("status: %v", err)
	}
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		got = exit.ExitCode()
	case err != nil:
		ts.Fatalf("%v", err)
	}
	if got != want {
		ts.Fatalf("exit status %d, want %d", got, want)
	}
}

// out TEXT requires TEXT in the stdout or stderr of the last command; "..." in
// TEXT matches anything. TEXT is taken literally: the program's own output
// shows the documented addresses only where the program prints them itself.
func cmdOut(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: out TEXT")
	}
	text := args[0]
	parts := strings.Split(text, "...")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	re := regexp.MustCompile(strings.Join(parts, ".*"))
	got := ts.ReadFile("stdout") + ts.ReadFile("stderr")
	if re.MatchString(got) == neg {
		if neg {
			ts.Fatalf("the output has %q", text)
		}
		ts.Fatalf("the output lacks %q", text)
	}
}

// ready ADDR... waits until something listens on each address.
func cmdReady(ts *testscript.TestScript, neg bool, args []string) {
	for _, addr := range args {
		deadline := time.Now().Add(10 * time.Second)
		for {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				_ = c.Close()
				break
			}
			if time.Now().After(deadline) {
				ts.Fatalf("nothing listens on %s after 10s: %v", addr, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// shset NAME CODE sets NAME to the value bash gives it by running CODE.
func cmdShset(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: shset NAME CODE")
	}
	if err := ts.Exec("bash", "-c", args[1]+"\nprintf %s \"$"+args[0]+"\""); err != nil {
		ts.Fatalf("%s: %v", args[1], err)
	}
	ts.Setenv(args[0], ts.ReadFile("stdout"))
}

// pid NAME BG sets NAME to the process ID of background command BG.
func cmdPid(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: pid NAME BACKGROUND")
	}
	file := filepath.Join(ts.Getenv("WORK"), ".doctest", args[1]+".pid")
	deadline := time.Now().Add(10 * time.Second)
	for {
		if data, err := os.ReadFile(file); err == nil && strings.HasSuffix(string(data), "\n") {
			ts.Setenv(args[0], strings.TrimSpace(string(data)))
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("background command %s wrote no process ID", args[1])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// --- from Markdown to scripts -------------------------------------------------

// script is the testscript made from the blocks of one NAME in one file.
type script struct {
	name     string // file-NAME
	lines    []string
	prelude  []string        // shell functions, for BASH_ENV
	tools    map[string]bool // programs from tools the script uses
	server   bool            // the server option was given
	postgres bool            // the postgres option was given
	bg       int             // background commands so far
	bgOfVar  map[string]string
	cmdFiles map[string]string // extra files of the archive
}

type skippedBlock struct{ where, reason string }

var (
	markerRE = regexp.MustCompile(`^<!--\s*doctest:\s*(.*?)\s*-->$`)
	nameRE   = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
	fenceRE  = regexp.MustCompile("^(\\s*)(```+)\\s*([A-Za-z0-9_-]*)")
	exitRE   = regexp.MustCompile(`^exit (\d+)\b`)
	assignRE = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)=`)
	funcRE   = regexp.MustCompile(`^\s*(function\s+)?[A-Za-z_][A-Za-z0-9_-]*\s*\(\)\s*\{`)
	waitRE   = regexp.MustCompile(`^wait\s+"?\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?"?$`)
	cdRE     = regexp.MustCompile(`^cd\s+([^\s;&|]+)$`)
	// leadingAssignments are the NAME=VALUE words before a simple command.
	leadingAssignments = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*=[^\s'"]*\s+)+`)
)

// parseDocument reads the sh blocks of one Markdown file.
func parseDocument(path string) ([]*script, []skippedBlock, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	rel, _ := filepath.Rel(repoRoot, path)
	base := strings.TrimSuffix(filepath.Base(path), ".md")
	byName := map[string]*script{}
	var order []*script
	var skipped []skippedBlock
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); i++ {
		m := fenceRE.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		indent, fence, lang := m[1], m[2], m[3]
		start := i
		var body []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != fence; i++ {
			body = append(body, strings.TrimPrefix(lines[i], indent))
		}
		if lang != "sh" && lang != "bash" && lang != "shell" {
			continue
		}
		where := fmt.Sprintf("%s:%d", rel, start+1)
		marker := ""
		for j := start - 1; j >= 0; j-- {
			if strings.TrimSpace(lines[j]) != "" {
				if mm := markerRE.FindStringSubmatch(strings.TrimSpace(lines[j])); mm != nil {
					marker = mm[1]
				}
				break
			}
		}
		words := strings.Fields(marker)
		switch {
		case len(words) == 0:
			return nil, nil, fmt.Errorf("%s: a %s block without a marker: put <!-- doctest: NAME --> (run it) or <!-- doctest: skip REASON --> on the line before it", where, lang)
		case words[0] == "skip":
			if len(words) < 2 {
				return nil, nil, fmt.Errorf("%s: doctest: skip needs a reason", where)
			}
			skipped = append(skipped, skippedBlock{where: where, reason: where + ": " + strings.Join(words[1:], " ")})
			continue
		case !nameRE.MatchString(words[0]):
			return nil, nil, fmt.Errorf("%s: doctest name %q: use lowercase letters, digits and -", where, words[0])
		}
		s := byName[words[0]]
		if s == nil {
			s = &script{name: base + "-" + words[0], tools: map[string]bool{}, bgOfVar: map[string]string{}, cmdFiles: map[string]string{}}
			byName[words[0]] = s
			order = append(order, s)
		}
		opts := map[string]bool{}
		for _, o := range words[1:] {
			switch o {
			case "server", "background", "repo", "postgres":
				opts[o] = true
			default:
				return nil, nil, fmt.Errorf("%s: unknown doctest option %q (server, background, repo, postgres)", where, o)
			}
		}
		if err := s.addBlock(rel, start+2, body, opts); err != nil {
			return nil, nil, err
		}
	}
	return order, skipped, nil
}

// addBlock translates one block whose first line is line firstLine of file.
func (s *script) addBlock(file string, firstLine int, body []string, opts map[string]bool) error {
	if opts["server"] && !s.server {
		s.server = true
		s.emit("# %s:%d: the server, started by the test", file, firstLine-1)
		s.emit("exec pgroup bin/monolock &server&")
		s.emit("ready 127.0.0.1:$DOCTEST_7070")
	}
	if opts["postgres"] && !s.postgres {
		s.postgres = true
		s.emit("# %s:%d: a throwaway PostgreSQL, started by the test", file, firstLine-1)
		s.emit("postgres DATABASE_URL")
	}
	if opts["repo"] {
		s.emit("cd $REPO")
		defer s.emit("cd $WORK")
	}
	for i := 0; i < len(body); {
		line := body[i]
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || (strings.HasPrefix(trimmed, "#") && !strings.HasPrefix(trimmed, "#>")) {
			i++
			continue
		}
		where := fmt.Sprintf("%s:%d", file, firstLine+i)
		if strings.HasPrefix(trimmed, "#>") {
			return fmt.Errorf("%s: #> output without a command before it", where)
		}
		n, err := commandLength(body[i:])
		if err != nil {
			return fmt.Errorf("%s: %v", where, err)
		}
		cmd := body[i : i+n]
		i += n
		var outs []string
		for i < len(body) && strings.HasPrefix(strings.TrimSpace(body[i]), "#>") {
			outs = append(outs, strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(body[i]), "#>")))
			i++
		}
		if err := s.addCommand(where, cmd, outs, opts["background"]); err != nil {
			return fmt.Errorf("%s: %v", where, err)
		}
	}
	return nil
}

// commandLength is the number of lines of the shell command that starts
// lines: it ends where bash can parse it (continuations, here documents and
// compound commands span lines).
func commandLength(lines []string) (int, error) {
	text := ""
	for n := 1; n <= len(lines); n++ {
		text += lines[n-1] + "\n"
		if strings.HasSuffix(lines[n-1], "\\") {
			continue
		}
		out, err := exec.Command("bash", "-n", "-c", text).CombinedOutput()
		if err == nil && !strings.Contains(string(out), "here-document") {
			return n, nil
		}
		if !strings.Contains(string(out), "unexpected end of file") && !strings.Contains(string(out), "here-document") {
			return 0, fmt.Errorf("bash cannot parse %q: %s", text, out)
		}
	}
	return 0, fmt.Errorf("the command does not end: %q", text)
}

func (s *script) emit(format string, args ...any) {
	s.lines = append(s.lines, fmt.Sprintf(format, args...))
}

// substitute replaces the documented ports and /tmp with the script's own.
func substitute(text string) string {
	for _, p := range ports {
		text = strings.ReplaceAll(text, "127.0.0.1:"+p, "127.0.0.1:${DOCTEST_"+p+"}")
	}
	return strings.ReplaceAll(text, "/tmp/", "${TMPDIR}/")
}

// quote makes text one testscript word.
func quote(text string) string { return "'" + strings.ReplaceAll(text, "'", "''") + "'" }

// addCommand translates one shell command.
func (s *script) addCommand(where string, cmd, outs []string, background bool) error {
	joined := strings.Join(cmd, "\n")
	code, comment := splitComment(joined)
	code = strings.TrimSpace(code)
	if len(cmd) > 1 && !strings.Contains(joined, "<<") && !funcRE.MatchString(joined) {
		code = strings.ReplaceAll(code, "\\\n", "") // continuation lines are one line
	}
	code = substitute(code)
	want := 0
	if m := exitRE.FindStringSubmatch(strings.TrimSpace(comment)); m != nil {
		want, _ = strconv.Atoi(m[1])
	}
	for _, tool := range tools {
		if regexp.MustCompile(`(^|[\s|;&(])` + tool + `(\s|$)`).MatchString(code) {
			s.tools[tool] = true
		}
	}
	s.emit("# %s: %s", where, firstLine(cmd))
	if strings.HasSuffix(code, "&") && !strings.HasSuffix(code, "&&") {
		background = true
		code = strings.TrimSpace(strings.TrimSuffix(code, "&"))
	}
	if hasJob(code) { // as in "for ...; do cmd & sleep 1; done": bash returns, its jobs run on
		background = true
	}
	switch {
	case code == "make build" || code == "make build && cd -":
		s.emit("# (bin/ holds the binaries built by the test)")
		return nil
	case funcRE.MatchString(code):
		s.prelude = append(s.prelude, code)
		return nil
	case cdRE.MatchString(code):
		s.emit("cd %s", cdRE.FindStringSubmatch(code)[1])
		return nil
	case waitRE.MatchString(code):
		name := waitRE.FindStringSubmatch(code)[1]
		bg, ok := s.bgOfVar[name]
		if !ok {
			return fmt.Errorf("wait for $%s, which no NAME=$! after a background command set", name)
		}
		s.emit("wait %s", bg)
		for _, o := range outs {
			s.emit("out %s", quote(o))
		}
		return nil
	}
	if m := assignRE.FindStringSubmatch(code); m != nil && isAssignmentOnly(code) {
		if len(outs) > 0 {
			return fmt.Errorf("#> after an assignment")
		}
		if strings.TrimPrefix(code, m[0]) == "$!" {
			if s.bg == 0 {
				return fmt.Errorf("%s=$! without a background command before it", m[1])
			}
			bg := fmt.Sprintf("bg%d", s.bg)
			s.bgOfVar[m[1]] = bg
			s.emit("pid %s %s", m[1], bg)
			return nil
		}
		s.emit("shset %s %s", m[1], quote(code))
		return nil
	}
	if strings.Contains(code, "\n") { // a here document: run it from a file
		file := fmt.Sprintf(".doctest/cmd%d.sh", len(s.cmdFiles)+1)
		s.cmdFiles[file] = code + "\n"
		code = "source \"$WORK/" + file + "\""
	}
	if background {
		if want != 0 || len(outs) > 0 {
			return fmt.Errorf("a background command cannot have an exit status or #> output; wait for it")
		}
		s.bg++
		bg := fmt.Sprintf("bg%d", s.bg)
		run := code
		if isSimple(code) { // exec, so that $! is the command itself
			env := leadingAssignments.FindString(code)
			run = "echo $$ > \"$WORK/.doctest/" + bg + ".pid\"; " + env + "exec " + code[len(env):]
		}
		s.emit("exec pgroup bash -c %s &%s&", quote(run), bg)
		return nil
	}
	if want == 0 {
		s.emit("exec bash -c %s", quote(code))
	} else {
		s.emit("status %d bash -c %s", want, quote(code))
	}
	for _, o := range outs {
		s.emit("out %s", quote(o))
	}
	return nil
}

func firstLine(cmd []string) string {
	line := strings.TrimSpace(cmd[0])
	if len(cmd) > 1 {
		line += " ..."
	}
	return line
}

// splitComment separates a command from the comment on its last line: a #
// that starts a word outside quotes.
func splitComment(text string) (code, comment string) {
	last := strings.LastIndex(text, "\n") + 1
	line := text[last:]
	at := -1
	unquoted(line, func(i, _ int) bool {
		if line[i] == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t') {
			at = i
		}
		return at < 0
	})
	if at < 0 {
		return text, ""
	}
	return text[:last+at], line[at+1:]
}

// unquoted calls visit with the index of every byte of code that is outside
// quotes and not escaped, and the parenthesis depth there; visit returns false
// to stop.
func unquoted(code string, visit func(i, depth int) bool) {
	inSingle, inDouble, depth := false, false, 0
	for i := 0; i < len(code); i++ {
		switch c := code[i]; {
		case c == '\\' && !inSingle:
			i++
		case c == '\'' && !inDouble:
			inSingle = !inSingle
		case c == '"' && !inSingle:
			inDouble = !inDouble
		case inSingle || inDouble:
		default:
			if c == '(' {
				depth++
			}
			if c == ')' {
				depth--
			}
			if !visit(i, depth) {
				return
			}
		}
	}
}

// isAssignmentOnly reports whether code is NAME=VALUE and nothing else.
func isAssignmentOnly(code string) bool {
	only := true
	unquoted(code, func(i, depth int) bool {
		if depth == 0 && strings.IndexByte(" \t;&|", code[i]) >= 0 {
			only = false
		}
		return only
	})
	return only
}

// hasJob reports whether code starts a background job: an & that is not part
// of &&, >&, &> or <&.
func hasJob(code string) bool {
	job := false
	unquoted(code, func(i, _ int) bool {
		if code[i] != '&' {
			return true
		}
		prev, next := byte(' '), byte(' ')
		if i > 0 {
			prev = code[i-1]
		}
		if i+1 < len(code) {
			next = code[i+1]
		}
		job = prev != '&' && prev != '>' && prev != '<' && next != '&' && next != '>'
		return !job
	})
	return job
}

// isSimple reports whether code is one simple command (with redirections),
// which bash can exec: no list, pipeline, subshell or job.
func isSimple(code string) bool {
	simple := !hasJob(code)
	unquoted(code, func(i, _ int) bool {
		switch code[i] {
		case ';', '|', '(', ')', '`':
			simple = false
		case '&':
			if i+1 < len(code) && code[i+1] == '&' {
				simple = false
			}
		}
		return simple
	})
	return simple
}

// txtar renders the script with its files.
func (s *script) txtar() (string, error) {
	var b strings.Builder
	var needs []string
	for tool := range s.tools {
		needs = append(needs, tool)
	}
	sort.Strings(needs)
	for _, tool := range needs {
		fmt.Fprintf(&b, "[!exec:%s] skip '%s is not installed'\n", tool, tool)
	}
	for _, l := range s.lines {
		b.WriteString(l + "\n")
	}
	b.WriteString("-- .doctest/prelude.sh --\nset -o pipefail\n")
	for _, f := range s.prelude {
		b.WriteString(f + "\n")
	}
	files := make([]string, 0, len(s.cmdFiles))
	for f := range s.cmdFiles {
		files = append(files, f)
	}
	sort.Strings(files)
	for _, f := range files {
		if strings.Contains(s.cmdFiles[f], "\n-- ") {
			return "", fmt.Errorf("%s: a here document line starts with '-- ', which txtar cannot hold", s.name)
		}
		fmt.Fprintf(&b, "-- %s --\n%s", f, s.cmdFiles[f])
	}
	return b.String(), nil
}

// cmdPostgres starts a throwaway PostgreSQL for the script, sets the
// variable args[0] to its URL, and removes it when the script ends.
func cmdPostgres(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: postgres VAR")
	}
	s, err := testdb.StartPostgres()
	if err != nil {
		ts.Fatalf("%v", err)
	}
	ts.Defer(func() { _ = s.Close() })
	ts.Setenv(args[0], s.URL)
}

// TestShellReading checks how the harness reads shell commands.
func TestShellReading(t *testing.T) {
	for _, c := range []struct{ in, code, comment string }{
		{"a b # exit 2", "a b ", " exit 2"},
		{"echo '#x' # c", "echo '#x' ", " c"},
		{`jq -r '.[] | "\(.name)"'   # names`, `jq -r '.[] | "\(.name)"'   `, " names"},
		{"curl 127.0.0.1:9090/x#frag", "curl 127.0.0.1:9090/x#frag", ""},
		{"a \\\n  b # exit 0", "a \\\n  b ", " exit 0"},
	} {
		code, comment := splitComment(c.in)
		if code != c.code || comment != c.comment {
			t.Errorf("splitComment(%q) = %q, %q; want %q, %q", c.in, code, comment, c.code, c.comment)
		}
	}
	for in, want := range map[string]bool{
		`A="-addr x -tls-ca ca.pem"`:   true,
		`X=$!`:                         true,
		`addr=$(curl -s x | jq -r .a)`: true,
		`A=1 cmd`:                      false,
		`A=1; cmd`:                     false,
	} {
		if got := isAssignmentOnly(in); got != want {
			t.Errorf("isAssignmentOnly(%q) = %v", in, got)
		}
	}
	for in, want := range map[string][2]bool{ // hasJob, isSimple
		`bin/monolock -listen x 2>/tmp/log`:                   {false, true},
		`bin/monolock 2>&1 | jq -c .`:                         {false, false},
		`for i in 1 2; do run x -- sleep 9 & sleep 0.2; done`: {true, false},
		`sleep 0.5; run x -- echo "a & b"`:                    {false, false},
		`a && b`:                                              {false, false},
		`run x -- sh -c 'sleep 1 & wait'`:                     {false, true},
	} {
		if job, simple := hasJob(in), isSimple(in); job != want[0] || simple != want[1] {
			t.Errorf("%q: hasJob %v, isSimple %v; want %v", in, job, simple, want)
		}
	}
}
