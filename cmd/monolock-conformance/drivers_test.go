package main

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/monolock/monolock/internal/conformance"
	"github.com/monolock/monolock/internal/testsupport/proc"
)

// waitingPerCore is how many of the kit's tests run at once per core when
// go test is not given -parallel (whose default is one per core). A scenario
// mostly waits, for a lease, a give-up deadline or a driver's runtime to
// start, so one per core leaves the cores idle; docs/conformance.md says how
// the kit keeps that load from deciding a verdict.
const waitingPerCore = 2

func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", strconv.Itoa(waitingPerCore*runtime.GOMAXPROCS(0))); err != nil {
			panic(err)
		}
	}
	code := m.Run()
	proc.Cleanup()
	os.Exit(code)
}

// clientDriver is one client's driver as the tests run it. To judge a new
// client, add an entry: its command, and the install command of its runtime
// for the skip message when that runtime is missing.
type clientDriver struct {
	name    string
	command func(t *testing.T, root string) []string
	install string // what to run when the runtime is missing
	// supports are the optional parts of the driver contract the driver
	// implements (conformance.Feature*): the scenarios that need one run
	// only for the drivers listed with it, and are skipped for the others.
	supports []string
}

var clientDrivers = []clientDriver{
	{
		name: "go",
		command: func(t *testing.T, _ string) []string {
			return []string{proc.MustBinary(t, "./internal/conformance/godriver")}
		},
		supports: []string{conformance.FeatureAddresses},
	},
	{
		name:     "python",
		command:  func(_ *testing.T, root string) []string { return python(root) },
		install:  "apt-get install -y python3 (3.9 or later)",
		supports: []string{conformance.FeatureAddresses},
	},
	{
		name: "python-aio",
		command: func(t *testing.T, root string) []string {
			argv := python(root)
			if argv == nil {
				return nil
			}
			return append(argv, "--aio")
		},
		install:  "apt-get install -y python3 (3.9 or later)",
		supports: []string{conformance.FeatureAddresses},
	},
	{
		name:     "node",
		command:  func(_ *testing.T, root string) []string { return node(root) },
		install:  "Node.js 20 or later with npm (apt-get install -y nodejs npm), then make node-build",
		supports: []string{conformance.FeatureAddresses},
	},
	{
		name:     "rust",
		command:  func(_ *testing.T, root string) []string { return rust(root) },
		install:  "Rust with cargo (rustup.rs), then make rust-build",
		supports: []string{conformance.FeatureAddresses},
	},
	{
		name: "rust-blocking",
		command: func(_ *testing.T, root string) []string {
			argv := rust(root)
			if argv == nil {
				return nil
			}
			return append(argv, "--blocking")
		},
		install:  "Rust with cargo (rustup.rs), then make rust-build",
		supports: []string{conformance.FeatureAddresses},
	},
	{
		name:     "java",
		command:  func(_ *testing.T, root string) []string { return java(root) },
		install:  "a JDK of 17 or later with Maven (apt-get install -y openjdk-17-jdk-headless maven), then make java-build",
		supports: []string{conformance.FeatureAddresses},
	},
}

// rust is the Rust driver's command (an example of the crate), nil when it
// is not built (make rust-build; make test does it).
func rust(root string) []string {
	bin := filepath.Join(root, "clients", "rust", "target", "debug", "examples", "conformance")
	if _, err := os.Stat(bin); err != nil {
		return nil
	}
	return []string{bin}
}

// java is the Java driver's command, nil when no java is installed or the
// client and its tests are not compiled (make java-build; make test does it).
// The flags shorten the start of a JVM, which the kit pays once a session.
func java(root string) []string {
	bin, err := exec.LookPath("java")
	if err != nil {
		return nil
	}
	target := filepath.Join(root, "clients", "java", "target")
	if _, err := os.Stat(filepath.Join(target, "test-classes", "io", "github", "monolock", "conformance", "ConformanceDriver.class")); err != nil {
		return nil
	}
	classpath := filepath.Join(target, "classes") + string(os.PathListSeparator) + filepath.Join(target, "test-classes")
	return []string{bin, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
		"-cp", classpath, "io.github.monolock.conformance.ConformanceDriver"}
}

// node is the Node.js driver's command, nil when no node of 20 or later is
// installed or the client is not built (make node-build; make test does it).
func node(root string) []string {
	bin, err := exec.LookPath("node")
	if err != nil {
		return nil
	}
	if exec.Command(bin, "-e", "process.exit(Number(process.versions.node.split('.')[0]) >= 20 ? 0 : 1)").Run() != nil {
		return nil
	}
	dir := filepath.Join(root, "clients", "node")
	if _, err := os.Stat(filepath.Join(dir, "dist", "index.js")); err != nil {
		return nil
	}
	return []string{bin, filepath.Join(dir, "conformance", "driver.mjs")}
}

// python is the Python driver's command, nil when no python3 of 3.9 or
// later is installed.
func python(root string) []string {
	py, err := exec.LookPath("python3")
	if err != nil {
		return nil
	}
	if exec.Command(py, "-c", "import sys; sys.exit(sys.version_info < (3, 9))").Run() != nil {
		return nil
	}
	return []string{py, filepath.Join(root, "clients", "python", "conformance_driver.py")}
}

// drivers returns every driver whose runtime is installed, the reference
// (Go) first, and logs why the others are left out.
func drivers(t *testing.T) []conformance.Driver {
	root, err := proc.RootDir()
	if err != nil {
		t.Fatal(err)
	}
	var out []conformance.Driver
	for _, d := range clientDrivers {
		argv := d.command(t, root)
		if argv == nil {
			t.Logf("SKIP the %s client's driver: its runtime is missing; install it with: %s", d.name, d.install)
			continue
		}
		out = append(out, conformance.Driver{Name: d.name, Argv: argv, Supports: d.supports})
	}
	return out
}

// TestConformance judges every client whose runtime is installed with every
// scenario, the end-to-end ones against the server built from this tree.
// Every scenario of every client is a parallel subtest, so that the longest
// client does not decide the package's time; TestMain bounds how many run.
func TestConformance(t *testing.T) {
	t.Parallel()
	all := drivers(t)
	server := proc.MustBinary(t, "./cmd/monolock")
	if len(all) == 0 || all[0].Name != "go" {
		t.Fatal("the Go driver must come first: it is the reference")
	}
	for _, judge := range all {
		t.Run(judge.Name, func(t *testing.T) {
			t.Parallel()
			cfg := conformance.Config{Drivers: all, Judge: judge, Server: server}
			for _, sc := range conformance.Scenarios() {
				t.Run(sc.Name, func(t *testing.T) {
					t.Parallel()
					res := conformance.Run(sc, cfg)
					if res.Skipped != "" {
						t.Skip(res.Skipped)
					}
					if res.Err != nil {
						t.Errorf("%v\n%s", res, res.Diagnostics)
					}
				})
			}
		})
	}
	if len(all) < len(clientDrivers) {
		t.Logf("judged %d of %d clients; see the SKIP lines above", len(all), len(clientDrivers))
	}
}
