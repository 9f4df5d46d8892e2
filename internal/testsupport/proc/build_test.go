package proc

import (
	"os"
	"path/filepath"
	"testing"
)

// TestBuildKeepsOneBuildPerSpec: two goroutines building the same Spec at
// once get the same directory holding the binary, a third Build finds it
// without building, and Cleanup removes it.
func TestBuildKeepsOneBuildPerSpec(t *testing.T) {
	s := Spec{Pkgs: []string{"./cmd/monolockctl"}, Env: []string{"CGO_ENABLED=0"}}
	type result struct {
		dir string
		err error
	}
	results := make(chan result, 2)
	for range 2 {
		go func() {
			dir, err := Build(s)
			results <- result{dir, err}
		}()
	}
	a, b := <-results, <-results
	if a.err != nil || b.err != nil {
		t.Fatal(a.err, b.err)
	}
	if a.dir != b.dir {
		t.Fatalf("two builds of one Spec landed in %s and %s", a.dir, b.dir)
	}
	bin := filepath.Join(a.dir, "monolockctl")
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Build(s)
	if err != nil || again != a.dir {
		t.Fatalf("Build again = %s, %v; want %s", again, err, a.dir)
	}
	if fi2, err := os.Stat(bin); err != nil || !fi2.ModTime().Equal(fi.ModTime()) {
		t.Fatalf("the second Build rewrote %s (%v)", bin, err)
	}
	entries, err := os.ReadDir(filepath.Dir(a.dir))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != filepath.Base(a.dir) {
			t.Errorf("%s left beside the build", e.Name())
		}
	}
	Cleanup()
	if _, err := os.Stat(a.dir); !os.IsNotExist(err) {
		t.Fatalf("after Cleanup, %s: %v; want it gone", a.dir, err)
	}
}
