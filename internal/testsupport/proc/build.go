package proc

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
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

// Build compiles the packages of s into a directory of their own, once per
// process (so once per test binary) for the same Spec, and returns the
// directory; each binary in it is named after its package's directory.
// go build runs in the root module's directory, found with go list: from the
// root module it is the module itself, from the bench module the directory
// its replace directive names.
//
// The file system is the cache: the directory is named after the Spec inside
// the process's own folder (processDir), and a build lands there only once
// complete (made aside, then renamed), so a second Build finds it and two
// goroutines building the same Spec at once keep whichever finished first.
// go build's own cache makes the loser's work cheap.
func Build(s Spec) (string, error) {
	dir := filepath.Join(processDir(), s.name())
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return dir, nil
	}
	root, err := RootDir()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(processDir(), 0o700); err != nil {
		return "", err
	}
	aside, err := os.MkdirTemp(processDir(), "building-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(aside) }() // left only when the rename failed
	args := append([]string{"build", "-o", aside + string(filepath.Separator)}, s.Flags...)
	cmd := exec.Command("go", append(args, s.Pkgs...)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), s.Env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %v\n%s", strings.Join(cmd.Args[1:], " "), err, out)
	}
	if err := os.Rename(aside, dir); err != nil {
		if fi, statErr := os.Stat(dir); statErr == nil && fi.IsDir() {
			return dir, nil // another goroutine's build of the same Spec landed first
		}
		return "", fmt.Errorf("keeping the build of %s: %w", strings.Join(s.Pkgs, " "), err)
	}
	return dir, nil
}

// name is the Spec's directory name: a digest of everything that changes
// the binaries.
func (s Spec) name() string {
	sum := sha256.Sum256([]byte(s.key()))
	return "bin-" + hex.EncodeToString(sum[:8])
}

// processDir is the folder holding this process's builds, removed by
// Cleanup. Its name carries the process ID and the process's start time
// (field 22 of /proc/self/stat, in clock ticks since boot), so a later
// process given the same ID never takes the binaries of one that died
// before its Cleanup for its own.
func processDir() string {
	started := "unknown"
	if stat, err := os.ReadFile("/proc/self/stat"); err == nil {
		// The fields after the command name, which is in parentheses and
		// may hold spaces; the first of them is field 3.
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 {
			if f := strings.Fields(string(stat[i+1:])); len(f) > 19 {
				started = f[19]
			}
		}
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("monolock-testsupport-%d-%s", os.Getpid(), started))
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
	_ = os.RemoveAll(processDir())
}

// RootDir is the directory of the root module as the current module sees it.
func RootDir() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", Module).Output()
	if err != nil {
		var stderr string
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			stderr = string(ee.Stderr)
		}
		return "", fmt.Errorf("go list -m %s (run from inside the repository): %v %s", Module, err, stderr)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("go list -m %s: no directory", Module)
	}
	return dir, nil
}
