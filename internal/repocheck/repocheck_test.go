package repocheck

import (
	"bytes"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// maxTracked is the largest file the repository may track. Sources, docs and
// fixtures stay far below it; a compiled binary (tens of MiB) does not.
const maxTracked = 1 << 20

// TestNoLargeTrackedFile fails when git tracks a file over 1 MiB: almost
// always a build output committed by accident.
func TestNoLargeTrackedFile(t *testing.T) {
	root := repoRoot(t)
	var large []string
	for _, name := range gitLines(t, root, "ls-files", "-z") {
		fi, err := os.Lstat(filepath.Join(root, name))
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the work tree, not yet in the index
		}
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().IsRegular() && fi.Size() > maxTracked {
			large = append(large, fmt.Sprintf("%s (%.1f MiB)", name, float64(fi.Size())/(1<<20)))
		}
	}
	if len(large) > 0 {
		t.Fatalf("git tracks files over 1 MiB, most likely build outputs:\n  %s\n"+
			"remove them with `git rm --cached FILE` and add the path to .gitignore",
			strings.Join(large, "\n  "))
	}
}

// TestGoBuildOutputsAreIgnored: for every command (package main) of both
// modules, the binary `go build` without -o writes is ignored by git wherever
// it can land. `go build [PKG]` run in folder D writes D/NAME, where NAME is
// the last element of PKG's import path; D is the package's folder or any
// folder above it within its module (a `go build` outside the module fails).
// Where D/NAME is a folder, go build refuses to write and nothing lands.
func TestGoBuildOutputsAreIgnored(t *testing.T) {
	root := repoRoot(t)
	mains := mainPackages(t, root)
	if len(mains) == 0 {
		t.Fatal("no package main found: the check lost its point")
	}
	var outputs []string
	for _, dir := range mains {
		modRoot, modPath := module(t, root, dir)
		name := path.Base(dir) // the import path's last element
		if dir == modRoot {
			name = path.Base(modPath)
		}
		for d := dir; ; d = path.Dir(d) {
			out := path.Join(d, name)
			if fi, err := os.Stat(filepath.Join(root, out)); err != nil || !fi.IsDir() {
				outputs = append(outputs, out)
			}
			if d == modRoot || d == "." {
				break
			}
		}
	}
	ignored := map[string]bool{}
	for _, p := range checkIgnore(t, root, outputs) {
		ignored[p] = true
	}
	var missing []string
	for _, out := range outputs {
		if !ignored[out] {
			missing = append(missing, "/"+out)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("`go build` without -o can leave these binaries, and .gitignore does not ignore them:\n  %s\nadd them to .gitignore",
			strings.Join(missing, "\n  "))
	}
}

// repoRoot returns the top of the git work tree, or skips the test outside one.
func repoRoot(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("skipping: git is not installed, and the repository checks read git's index")
	}
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skip("skipping: not in a git checkout (a source archive?), and the repository checks read git's index")
	}
	return strings.TrimSpace(string(out))
}

// gitLines runs git in root and splits its NUL-separated output.
func gitLines(t *testing.T, root string, args ...string) []string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	var lines []string
	for _, l := range bytes.Split(out, []byte{0}) {
		if len(l) > 0 {
			lines = append(lines, string(l))
		}
	}
	return lines
}

// checkIgnore returns those of paths (relative to root) that git ignores.
func checkIgnore(t *testing.T, root string, paths []string) []string {
	t.Helper()
	cmd := exec.Command("git", "check-ignore", "--no-index", "-z", "--stdin")
	cmd.Dir = root
	cmd.Stdin = strings.NewReader(strings.Join(paths, "\x00") + "\x00")
	out, err := cmd.Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 1 {
		return nil // none is ignored
	}
	if err != nil {
		t.Fatalf("git check-ignore: %v", err)
	}
	return strings.FieldsFunc(string(out), func(r rune) bool { return r == 0 })
}

// mainPackages returns the folders (relative to root, slash-separated) of the
// tracked packages named main.
func mainPackages(t *testing.T, root string) []string {
	t.Helper()
	dirs := map[string]bool{}
	fset := token.NewFileSet()
	for _, name := range gitLines(t, root, "ls-files", "-z", "*.go") {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(root, name), nil, parser.PackageClauseOnly)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			t.Fatal(err)
		}
		if f.Name.Name == "main" {
			dirs[path.Dir(name)] = true
		}
	}
	var list []string
	for d := range dirs {
		list = append(list, d)
	}
	sort.Strings(list)
	return list
}

// module returns the folder of the go.mod that holds dir and its module path.
func module(t *testing.T, root, dir string) (modRoot, modPath string) {
	t.Helper()
	for d := dir; ; d = path.Dir(d) {
		data, err := os.ReadFile(filepath.Join(root, d, "go.mod"))
		if err == nil {
			for _, line := range strings.Split(string(data), "\n") {
				if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
					return d, strings.Trim(f[1], `"`)
				}
			}
			t.Fatalf("%s/go.mod names no module", d)
		}
		if d == "." {
			t.Fatalf("no go.mod holds %s", dir)
		}
	}
}
