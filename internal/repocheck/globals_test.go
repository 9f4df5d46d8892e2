package repocheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestNoPackageLevelMutableState fails on a package-level variable of a
// package other than main (both modules, tests included) that holds state
// changing while the program runs: one written outside its declaration (an
// assignment, ++/--, delete or clear, its address taken), one declared
// without a value (a sync.Mutex, sync.Once or counter is written through its
// methods), or one made by sync.OnceValue, OnceValues or OnceFunc (a cache
// filled on first use); and, from any package of the repository, a write
// to another package's exported variable. What stays allowed is immutable:
// sentinel errors (errors.New), compiled patterns (regexp.MustCompile),
// lookup tables and byte frames that nothing writes, and //go:embed file
// systems. Only main wires state together; everything else receives it.
// The check reads syntax only: a table written through a pointer or a
// method it is handed to escapes it, and review has to catch that.
func TestNoPackageLevelMutableState(t *testing.T) {
	root := repoRoot(t)
	_, modPath := module(t, root, ".")
	pkgs := map[string][]*ast.File{} // folder + " " + package name
	var all []*ast.File
	exported := map[string]map[string]bool{} // import path → its exported variables
	fset := token.NewFileSet()
	for _, name := range gitLines(t, root, "ls-files", "-z", "*.go") {
		f, err := parser.ParseFile(fset, filepath.Join(root, name), nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, f)
		if f.Name.Name == "main" {
			continue
		}
		key := path.Dir(name) + " " + f.Name.Name
		pkgs[key] = append(pkgs[key], f)
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		// The bench module's path is the main module's plus "/bench", so
		// the folder gives the import path in both.
		imp := path.Join(modPath, path.Dir(name))
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.VAR {
				for _, sp := range g.Specs {
					for _, n := range sp.(*ast.ValueSpec).Names {
						if n.IsExported() {
							if exported[imp] == nil {
								exported[imp] = map[string]bool{}
							}
							exported[imp][n.Name] = true
						}
					}
				}
			}
		}
	}
	if len(pkgs) == 0 {
		t.Fatal("no package other than main found: the check lost its point")
	}
	var found []string
	for _, files := range pkgs {
		found = append(found, mutableGlobals(fset, root, files)...)
	}
	for _, f := range all {
		found = append(found, foreignWrites(fset, root, f, exported)...)
	}
	sort.Strings(found)
	if len(found) > 0 {
		t.Fatalf("package-level variables holding mutable state (the rule: only main wires state; "+
			"give the state to a value its users hold, made by a constructor or by main's prepare, "+
			"or derive it from what already exists, such as the file system):\n  %s",
			strings.Join(found, "\n  "))
	}
}

// mutableGlobals returns one line per mutable package-level variable of the
// package made of files.
func mutableGlobals(fset *token.FileSet, root string, files []*ast.File) []string {
	where := func(p token.Pos) string { return position(fset, root, p) }
	vars := map[string]bool{}          // the package's variables by name
	specs := map[*ast.ValueSpec]bool{} // their declarations
	var found []string
	for _, f := range files {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				specs[vs] = true
				for i, n := range vs.Names {
					if n.Name == "_" {
						continue
					}
					vars[n.Name] = true
					switch {
					case len(vs.Values) == 0 && !embeds(g, vs):
						found = append(found, fmt.Sprintf("%s: var %s has no value: it is written later or through its methods", where(n.Pos()), n.Name))
					case len(vs.Values) == len(vs.Names) && isOnceCall(vs.Values[i]):
						found = append(found, fmt.Sprintf("%s: var %s is a cache filled on first use (sync.Once...)", where(n.Pos()), n.Name))
					}
				}
			}
		}
	}
	// global reports whether e is, at its root, one of the package's variables.
	global := func(e ast.Expr) (*ast.Ident, bool) {
		for ok := true; ok; e, ok = operand(e) {
			if x, isIdent := e.(*ast.Ident); isIdent {
				if x.Obj != nil { // declared in this file: a local, or one of the package's
					vs, ok := x.Obj.Decl.(*ast.ValueSpec)
					return x, x.Obj.Kind == ast.Var && ok && specs[vs]
				}
				return x, vars[x.Name] // declared in another file of the package, or elsewhere
			}
		}
		return nil, false
	}
	for _, f := range files {
		eachWrite(f, func(e ast.Expr, how string) {
			if id, ok := global(e); ok {
				found = append(found, fmt.Sprintf("%s: var %s is written (%s)", position(fset, root, e.Pos()), id.Name, how))
			}
		})
	}
	return found
}

// embeds reports whether a value-less declaration is filled by //go:embed,
// which the compiler does once and nothing writes afterwards.
func embeds(g *ast.GenDecl, vs *ast.ValueSpec) bool {
	for _, doc := range []*ast.CommentGroup{g.Doc, vs.Doc} {
		if doc == nil {
			continue
		}
		for _, c := range doc.List {
			if strings.HasPrefix(c.Text, "//go:embed ") {
				return true
			}
		}
	}
	return false
}

// isOnceCall reports whether e calls sync.OnceValue, OnceValues or OnceFunc.
func isOnceCall(e ast.Expr) bool {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	fun := call.Fun
	if ix, ok := fun.(*ast.IndexListExpr); ok {
		fun = ix.X
	}
	if ix, ok := fun.(*ast.IndexExpr); ok {
		fun = ix.X
	}
	sel, ok := fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "sync" && strings.HasPrefix(sel.Sel.Name, "Once")
}

// TestMutableGlobalsFindsEachForm: the check finds every form of mutable
// package-level state it names, across the package's files, and passes the
// immutable ones and a local that shadows a package variable.
func TestMutableGlobalsFindsEachForm(t *testing.T) {
	sources := map[string]string{
		"a.go": `package p

import ("errors"; "regexp"; "sync")

var ErrGone = errors.New("gone")
var pattern = regexp.MustCompile("x+")
var table = map[string]int{"a": 1}
var frame = []byte{1, 2}
var mu sync.Mutex
var cached = sync.OnceValue(func() int { return 1 })
var counter = 0
var byOther = map[string]bool{}
var taken = 0
var dropped = map[string]bool{}

func f() int {
	counter++
	frame := []byte{3} // a local shadowing the table
	frame[0] = 4
	_ = &taken
	delete(dropped, "a")
	return table["a"] + len(frame)
}
`,
		"b.go": `package p

func g() { byOther["x"] = true }
`,
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range []string{"a.go", "b.go"} {
		f, err := parser.ParseFile(fset, filepath.Join(t.TempDir(), name), sources[name], parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	found := strings.Join(mutableGlobals(fset, "/", files), "\n")
	for _, want := range []string{"var mu has no value", "var cached is a cache", "var counter is written (++)",
		"var byOther is written (assigned)", "var taken is written (its address taken)", "var dropped is written (delete)"} {
		if !strings.Contains(found, want) {
			t.Errorf("missed %q; found:\n%s", want, found)
		}
	}
	for _, allowed := range []string{"ErrGone", "pattern", "table", "frame"} {
		if strings.Contains(found, "var "+allowed+" ") {
			t.Errorf("%s is immutable, yet found:\n%s", allowed, found)
		}
	}
}

// position is p as file:line, the file relative to root.
func position(fset *token.FileSet, root string, p token.Pos) string {
	pos := fset.Position(p)
	rel, err := filepath.Rel(root, pos.Filename)
	if err != nil {
		rel = pos.Filename
	}
	return fmt.Sprintf("%s:%d", filepath.ToSlash(rel), pos.Line)
}

// eachWrite calls write with every expression f writes and how: the left of
// an assignment or a range, the operand of ++, --, & (whoever holds the
// address may write), delete and clear.
func eachWrite(f *ast.File, write func(e ast.Expr, how string)) {
	ast.Inspect(f, func(n ast.Node) bool {
		var written []ast.Expr
		how := "assigned"
		switch x := n.(type) {
		case *ast.AssignStmt:
			if x.Tok != token.DEFINE {
				written = x.Lhs
			}
		case *ast.RangeStmt:
			if x.Tok == token.ASSIGN {
				written = []ast.Expr{x.Key, x.Value}
			}
		case *ast.IncDecStmt:
			written, how = []ast.Expr{x.X}, x.Tok.String()
		case *ast.UnaryExpr:
			if x.Op == token.AND {
				written, how = []ast.Expr{x.X}, "its address taken"
			}
		case *ast.CallExpr:
			if id, ok := x.Fun.(*ast.Ident); ok && (id.Name == "delete" || id.Name == "clear") && len(x.Args) > 0 {
				written, how = x.Args[:1], id.Name
			}
		}
		for _, e := range written {
			if e != nil {
				write(e, how)
			}
		}
		return true
	})
}

// foreignWrites returns one line per write, in f, to an exported variable of
// another package of the repository (pkg.Var = …, pkg.Table[k] = …).
func foreignWrites(fset *token.FileSet, root string, f *ast.File, exported map[string]map[string]bool) []string {
	imports := map[string]string{} // the name f uses → import path
	for _, im := range f.Imports {
		p := strings.Trim(im.Path.Value, `"`)
		name := path.Base(p)
		if im.Name != nil {
			name = im.Name.Name
		}
		imports[name] = p
	}
	var found []string
	eachWrite(f, func(e ast.Expr, how string) {
		for ok := true; ok; e, ok = operand(e) {
			if x, isSel := e.(*ast.SelectorExpr); isSel {
				if pkg, ok := x.X.(*ast.Ident); ok && pkg.Obj == nil && exported[imports[pkg.Name]][x.Sel.Name] {
					found = append(found, fmt.Sprintf("%s: var %s.%s is written (%s)", position(fset, root, e.Pos()), pkg.Name, x.Sel.Name, how))
					return
				}
			}
		}
	})
	return found
}

// TestForeignWritesFindsAWriteThroughAnImport: a write to another package's
// exported variable, under its own name or an alias, is found; a read, and
// a write to a local that has the import's name, are not.
func TestForeignWritesFindsAWriteThroughAnImport(t *testing.T) {
	src := `package q

import (
	"example.com/m/wire"
	w2 "example.com/m/wire"
)

func f() byte {
	wire.Heartbeat[0] = 9
	w2.Tables = nil
	return wire.Release[0]
}

func g() {
	var wire struct{ Heartbeat []byte }
	wire.Heartbeat = nil
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join(t.TempDir(), "q.go"), src, 0)
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]map[string]bool{"example.com/m/wire": {"Heartbeat": true, "Release": true, "Tables": true}}
	found := foreignWrites(fset, "/", f, exported)
	got := strings.Join(found, "\n")
	if len(found) != 2 || !strings.Contains(got, "var wire.Heartbeat is written (assigned)") || !strings.Contains(got, "var w2.Tables is written (assigned)") {
		t.Errorf("found:\n%s\nwant the writes to wire.Heartbeat and w2.Tables only", got)
	}
}

// operand is what a written expression writes into: the X of x[i], x[i:j],
// *x, x.f and (x); ok is false for anything else.
func operand(e ast.Expr) (x ast.Expr, ok bool) {
	switch e := e.(type) {
	case *ast.ParenExpr:
		return e.X, true
	case *ast.IndexExpr:
		return e.X, true
	case *ast.SliceExpr:
		return e.X, true
	case *ast.StarExpr:
		return e.X, true
	case *ast.SelectorExpr:
		return e.X, true
	}
	return nil, false
}
