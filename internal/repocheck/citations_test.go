package repocheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// citedDocs are the passages that tell a contributor where things are: all
// of CONTRIBUTING.md, and the README from its architecture walk-through to
// the end of its repository layout, less the figures of "Measured", which
// name no files.
var citedDocs = []struct {
	file, from, to string // the passage runs from the line from to the line to ("": the end)
}{
	{"CONTRIBUTING.md", "", ""},
	{"README.md", "## Architecture", "## Measured"},
	{"README.md", "## Repository layout", "## License"},
}

// TestDocsCiteWhatExists: every file, folder, test, rule script, make
// target and Go name those passages cite exists, so that a rename or a
// removal cannot leave them pointing at nothing.
func TestDocsCiteWhatExists(t *testing.T) {
	root := repoRoot(t)
	tree := newTreeIndex(t, root)
	var missing []string
	for _, d := range citedDocs {
		data, err := os.ReadFile(filepath.Join(root, d.file))
		if err != nil {
			t.Fatal(err)
		}
		text, err := passage(string(data), d.from, d.to)
		if err != nil {
			t.Fatalf("%s: %v: update citedDocs", d.file, err)
		}
		for _, m := range tree.missing(t, text) {
			missing = append(missing, d.file+": "+m)
		}
	}
	if len(missing) > 0 {
		t.Errorf("the docs cite what the repository does not have:\n  %s\n"+
			"rename the citation, or restore what it names", strings.Join(missing, "\n  "))
	}

	// The check can fail: each kind of citation pointing at nothing is
	// reported, and the same kinds pointing at real things are not.
	t.Run("check", func(t *testing.T) {
		good := "Run `go test -run 'TestRuleScripts/heartbeats_and_expiry' ./eventloop/`, " +
			"`make build`, see `eventloop/turn.go`, `turn.go`, `internal/testsupport/`, `TestNoLargeTrackedFile`, " +
			"`owner.traffic`, `locktable.Table.AcquireBytes`, `errors.Is`; nothing in `bin/`.\n" +
			"```sh\ngo test -race -run 'TestDescriptorExhaustion/mTLS' ./cmd/monolock/   # see no_such_file.go\n```\n" +
			"```\neventloop/     the loop\n```\n"
		if m := tree.missing(t, good); len(m) > 0 {
			t.Fatalf("real citations reported missing: %q", m)
		}
		for _, bad := range []string{
			"`eventloop/no_such_file.go`",
			"`no_such_file.go`",
			"`internal/nosuchpackage/`",
			"`TestNoSuchTest`",
			"`TestRuleScripts/no_such_script`",
			"`TestDescriptorExhaustion/noSuchCase`",
			"`make no-such-target`",
			"`owner.noSuchMethod`",
			"`locktable.NoSuchType`",
			"`locktable.Table.NoSuchMethod`",
			"`nosuchpackage.Name`",
			"```sh\ngo test -run 'TestNoSuchTest' ./eventloop/\n```\n",
			"```sh\ngo test ./nosuchdir/\n```\n",
			"```\nnosuchdir/     a folder\n```\n",
		} {
			if m := tree.missing(t, bad); len(m) == 0 {
				t.Errorf("%s: not reported missing", bad)
			}
		}
	})
}

// passage returns the lines of text from the line from (included) to the
// line to (excluded); "" means the start or the end.
func passage(text, from, to string) (string, error) {
	lines := strings.Split(text, "\n")
	start, end := 0, len(lines)
	if from != "" {
		start = lineIndex(lines, from)
		if start < 0 {
			return "", fmt.Errorf("no line %q", from)
		}
	}
	if to != "" {
		n := lineIndex(lines[start:], to)
		if n < 0 {
			return "", fmt.Errorf("no line %q after %q", to, from)
		}
		end = start + n
	}
	return strings.Join(lines[start:end], "\n"), nil
}

// lineIndex is the index of the first of lines that is want, spaces aside.
func lineIndex(lines []string, want string) int {
	return slices.IndexFunc(lines, func(l string) bool { return strings.TrimSpace(l) == want })
}

// treeIndex is what the work tree holds: its files (tracked, or new and not
// ignored), its folders, its tests and its make targets.
type treeIndex struct {
	root    string
	files   []string            // slash-separated, relative to root
	dirs    map[string]bool     // every folder that holds a file
	tests   map[string][]string // test, benchmark, fuzz or example name → the files declaring it
	targets map[string]bool     // the Makefile's targets
	decls   map[string]bool     // Go declarations: pkg.Name, Type.Method, Type.field
	pkgs    map[string]bool     // the tree's package names
	types   map[string]bool     // the tree's type names
	std     map[string]bool     // the standard library's package names
}

var (
	testFunc   = regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz|Example)\w*)\(`)
	makeTarget = regexp.MustCompile(`(?m)^([A-Za-z][\w.-]*(?:[ \t]+[A-Za-z][\w.-]*)*)[ \t]*:([^=]|$)`)
)

func newTreeIndex(t *testing.T, root string) *treeIndex {
	t.Helper()
	x := &treeIndex{root: root, dirs: map[string]bool{}, tests: map[string][]string{}, targets: map[string]bool{},
		decls: map[string]bool{}, pkgs: map[string]bool{}, types: map[string]bool{}, std: map[string]bool{}}
	x.files = gitLines(t, root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	for _, f := range x.files {
		for d := path.Dir(f); d != "."; d = path.Dir(d) {
			x.dirs[d] = true
		}
		if !strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			continue // deleted in the work tree
		}
		for _, m := range testFunc.FindAllStringSubmatch(string(src), -1) {
			x.tests[m[1]] = append(x.tests[m[1]], f)
		}
	}
	x.indexGo(t)
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range makeTarget.FindAllStringSubmatch(string(mk), -1) {
		for _, name := range strings.Fields(m[1]) {
			x.targets[name] = true
		}
	}
	return x
}

var (
	codeSpan    = regexp.MustCompile("`([^`\n]+)`")
	fencedBlock = regexp.MustCompile("(?ms)^```([^\n]*)\n(.*?)^```")
	makeCall    = regexp.MustCompile(`\bmake ([a-z][\w-]*)`)
	testName    = regexp.MustCompile(`^(?:Test|Benchmark|Fuzz|Example)[A-Z]\w*(?:/[\w-]+)?$`)
	pathLike    = regexp.MustCompile(`^\.?[\w.*-]+(?:/[\w.*-]*)*$`)
	goName      = regexp.MustCompile(`^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*){1,2}$`)
	fileExt     = regexp.MustCompile(`\.(go|md|mod|sum|py|ts|js|rs|java|toml|json|yaml|yml|sh|sql|txt|conf)$`)
)

// missing returns what text cites and the tree lacks, one line each.
func (x *treeIndex) missing(t *testing.T, text string) []string {
	t.Helper()
	cited := map[string]bool{}
	// A fenced block is a shell session: its paths and test names count,
	// the prose of its comments does not.
	for _, b := range fencedBlock.FindAllStringSubmatch(text, -1) {
		lang, body := b[1], b[2]
		if lang == "" {
			// A listing (the repository layout): its first column is a path.
			for _, line := range strings.Split(body, "\n") {
				if f := strings.Fields(line); len(f) > 0 && line[0] != ' ' {
					cited[f[0]] = true
				}
			}
			continue
		}
		for _, line := range strings.Split(body, "\n") {
			code, _, _ := strings.Cut(line, "#")
			for _, tok := range tokens(code) {
				if strings.HasPrefix(tok, "./") || testName.MatchString(tok) {
					cited[tok] = true
				}
			}
			for _, m := range makeCall.FindAllStringSubmatch(code, -1) {
				cited["make "+m[1]] = true
			}
		}
	}
	prose := fencedBlock.ReplaceAllString(text, "")
	for _, s := range codeSpan.FindAllStringSubmatch(prose, -1) {
		for _, m := range makeCall.FindAllStringSubmatch(s[1], -1) {
			cited["make "+m[1]] = true
		}
		for _, tok := range tokens(s[1]) {
			cited[tok] = true
		}
	}
	var names []string
	for c := range cited {
		names = append(names, c)
	}
	sort.Strings(names)
	var out []string
	var paths []string
	for _, c := range names {
		switch {
		case strings.HasPrefix(c, "make "):
			if !x.targets[strings.TrimPrefix(c, "make ")] {
				out = append(out, "`"+c+"`: no such target in the Makefile")
			}
		case testName.MatchString(c):
			if why := x.testMissing(c); why != "" {
				out = append(out, "`"+c+"`: "+why)
			}
		case isPath(c):
			paths = append(paths, strings.TrimPrefix(c, "./"))
		case goName.MatchString(c):
			if why := x.goNameMissing(c); why != "" {
				out = append(out, "`"+c+"`: "+why)
			}
		}
	}
	// A path git ignores is a build output the docs warn about (bin/), not
	// a file of the tree.
	ignored := map[string]bool{}
	if len(paths) > 0 {
		for _, p := range checkIgnore(t, x.root, paths) {
			ignored[p] = true
		}
	}
	for _, p := range paths {
		if !ignored[p] && !x.hasPath(p) {
			out = append(out, "`"+p+"`: no such file or folder")
		}
	}
	return out
}

// tokens splits code into words, without the quotes and punctuation around
// them.
func tokens(code string) []string {
	var out []string
	for _, f := range strings.Fields(code) {
		f = strings.Trim(f, `'",;:()[]`)
		if f != "" {
			out = append(out, f)
		}
	}
	return out
}

// isPath reports whether a word names a file or folder: it has a slash or a
// file extension, and nothing that makes it a URL, an address, a flag, an
// elided path (internal/…) or a Go pattern (./...).
func isPath(w string) bool {
	if !pathLike.MatchString(w) || strings.Contains(w, "...") || strings.HasPrefix(w, "-") {
		return false
	}
	return strings.Contains(w, "/") || fileExt.MatchString(w)
}

// hasPath reports whether p (a glob allowed) names a file or folder of the
// tree, from the root or, for a name cited within its folder's prose
// (turn.go, audit/), as the tail of one.
func (x *treeIndex) hasPath(p string) bool {
	p = strings.TrimSuffix(p, "/")
	match := func(name string) bool {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
		for i := strings.IndexByte(name, '/'); i >= 0; i = strings.IndexByte(name, '/') {
			name = name[i+1:]
			if ok, _ := path.Match(p, name); ok {
				return true
			}
		}
		return false
	}
	for _, f := range x.files {
		if match(f) {
			return true
		}
	}
	for d := range x.dirs {
		if match(d) {
			return true
		}
	}
	return false
}

// testMissing says why a cited test (Name or Name/sub) does not exist, or
// "". A subtest exists when its name is a string in the test's file or a
// file under the testdata of the test's folder (a rule script).
func (x *treeIndex) testMissing(c string) string {
	name, sub, _ := strings.Cut(c, "/")
	files := x.tests[name]
	if len(files) == 0 {
		return "no such test function"
	}
	if sub == "" {
		return ""
	}
	for _, f := range files {
		src, err := os.ReadFile(filepath.Join(x.root, f))
		if err == nil && (strings.Contains(string(src), `"`+sub+`"`) || strings.Contains(string(src), "`"+sub+"`")) {
			return ""
		}
		prefix := path.Join(path.Dir(f), "testdata") + "/"
		for _, g := range x.files {
			if strings.HasPrefix(g, prefix) && strings.TrimSuffix(path.Base(g), path.Ext(g)) == sub {
				return ""
			}
		}
	}
	return "no subtest " + sub + " (a string in " + strings.Join(files, ", ") + ", or a file under its testdata)"
}

// indexGo records the Go declarations of the tree, and the standard
// library's package names, which the docs cite too (errors.Is).
func (x *treeIndex) indexGo(t *testing.T) {
	t.Helper()
	fset := token.NewFileSet()
	for _, name := range x.files {
		if !strings.HasSuffix(name, ".go") || strings.Contains(name, "testdata/") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(x.root, name), nil, parser.SkipObjectResolution)
		if err != nil {
			continue // deleted in the work tree, or not Go that parses (a fixture)
		}
		pkg := f.Name.Name
		x.pkgs[pkg] = true
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					x.decls[pkg+"."+d.Name.Name] = true
					continue
				}
				recv := d.Recv.List[0].Type
				if star, ok := recv.(*ast.StarExpr); ok {
					recv = star.X
				}
				if idx, ok := recv.(*ast.IndexExpr); ok { // a generic receiver
					recv = idx.X
				}
				if id, ok := recv.(*ast.Ident); ok {
					x.decls[id.Name+"."+d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, sp := range d.Specs {
					switch sp := sp.(type) {
					case *ast.TypeSpec:
						x.decls[pkg+"."+sp.Name.Name] = true
						x.types[sp.Name.Name] = true
						if st, ok := sp.Type.(*ast.StructType); ok {
							for _, fl := range st.Fields.List {
								for _, n := range fl.Names {
									x.decls[sp.Name.Name+"."+n.Name] = true
								}
							}
						}
					case *ast.ValueSpec:
						for _, n := range sp.Names {
							x.decls[pkg+"."+n.Name] = true
						}
					}
				}
			}
		}
	}
	out, err := exec.Command("go", "list", "std").Output()
	if err != nil {
		t.Fatalf("go list std: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		x.std[path.Base(p)] = true
	}
}

// goNameMissing says why a cited Go name (pkg.Name, Type.Method,
// pkg.Type.Method) is not declared in the tree, or "". A name of the
// standard library's is taken as it is.
func (x *treeIndex) goNameMissing(c string) string {
	parts := strings.Split(c, ".")
	switch {
	case x.pkgs[parts[0]] && x.decls[parts[0]+"."+parts[1]]:
		if len(parts) == 3 && !x.decls[parts[1]+"."+parts[2]] {
			return "no method or field " + parts[2] + " of " + parts[0] + "." + parts[1]
		}
		return ""
	case len(parts) == 2 && x.types[parts[0]]:
		if !x.decls[c] {
			return "no method or field " + parts[1] + " of type " + parts[0]
		}
		return ""
	case x.pkgs[parts[0]]:
		return "package " + parts[0] + " declares no " + parts[1]
	case x.std[parts[0]]:
		return ""
	}
	return "no package or type " + parts[0]
}
