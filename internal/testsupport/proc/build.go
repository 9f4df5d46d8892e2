package proc

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Module is the import path of the repository's root module.
const Module = "github.com/monolock/monolock"

// Spec says what Build compiles.
type Spec struct {
	// Pkgs are main packages of the root module, relative to its directory
	// as in the Makefile ("./cmd/monolock").
	Pkgs []string
	// Flags are go build flags ("-race").
	Flags []string
	// Env is added to the environment of go build ("CGO_ENABLED=0").
	Env []string
}

func (s Spec) key() string {
	return strings.Join(s.Pkgs, " ") + "\x00" + strings.Join(s.Flags, " ") + "\x00" + strings.Join(s.Env, " ")
}

// build is one Spec's result, made once.
type build struct {
	once sync.Once
	dir  string
	err  error
}

var (
	buildMu  sync.Mutex
	builds   = map[string]*build{}
	buildDir string // holds every build of this process; removed by Cleanup
)

// Build compiles the packages of s into a directory of their own, once per
// process (so once per test binary) for the same Spec, and returns the
// directory; each binary in it is named after its package's directory.
// go build runs in the root module's directory, found with go list: from the
// root module it is the module itself, from the bench module the directory
// its replace directive names.
func Build(s Spec) (string, error) {
	buildMu.Lock()
	b, ok := builds[s.key()]
	if !ok {
		b = &build{}
		builds[s.key()] = b
	}
	buildMu.Unlock()
	b.once.Do(func() { b.dir, b.err = compile(s) })
	return b.dir, b.err
}

func compile(s Spec) (string, error) {
	root, err := RootDir()
	if err != nil {
		return "", err
	}
	buildMu.Lock()
	if buildDir == "" {
		buildDir, err = os.MkdirTemp("", "monolock-testsupport-")
	}
	parent := buildDir
	buildMu.Unlock()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp(parent, "bin-")
	if err != nil {
		return "", err
	}
	args := append([]string{"build", "-o", dir + string(filepath.Separator)}, s.Flags...)
	cmd := exec.Command("go", append(args, s.Pkgs...)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), s.Env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %v\n%s", strings.Join(cmd.Args[1:], " "), err, out)
	}
	return dir, nil
}

// BuildTo builds one package of the root module ("./cmd/monolock") into the
// file out, for a harness that keeps the binary; go build's output goes to
// w. Unlike Build it builds every time.
func BuildTo(out, pkg string, w io.Writer) error {
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	root, err := RootDir()
	if err != nil {
		return err
	}
	cmd := exec.Command("go", "build", "-o", abs, pkg)
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = w, w
	return cmd.Run()
}

// Binary builds one package (Build) and returns the binary's path.
func Binary(pkg string, flags ...string) (string, error) {
	dir, err := Build(Spec{Pkgs: []string{pkg}, Flags: flags})
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, path.Base(pkg)), nil
}

// MustBinary is Binary for a test: a failed build ends it.
func MustBinary(t testing.TB, pkg string, flags ...string) string {
	t.Helper()
	bin, err := Binary(pkg, flags...)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// Cleanup removes everything Build made. A TestMain calls it after m.Run.
func Cleanup() {
	buildMu.Lock()
	defer buildMu.Unlock()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	buildDir = ""
	builds = map[string]*build{}
}

var (
	rootOnce sync.Once
	rootDir  string
	rootErr  error
)

// RootDir is the directory of the root module as the current module sees it.
func RootDir() (string, error) {
	rootOnce.Do(func() {
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", Module).Output()
		if err != nil {
			var stderr string
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			rootErr = fmt.Errorf("go list -m %s (run from inside the repository): %v %s", Module, err, stderr)
			return
		}
		rootDir = strings.TrimSpace(string(out))
		if rootDir == "" {
			rootErr = fmt.Errorf("go list -m %s: no directory", Module)
		}
	})
	return rootDir, rootErr
}
