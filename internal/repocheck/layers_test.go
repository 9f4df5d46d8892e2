package repocheck

import (
	"os/exec"
	"sort"
	"strings"
	"testing"
)

// mayImport is the README's dependency rule as data: for each area of the
// main module, the areas of the module its packages may import (besides
// their own area, the standard library and other modules). An area is a
// folder of the module; a package belongs to the longest area its path
// starts with. The arrows point one way: cmd → eventloop → eventloop/tlsconn;
// internal/… → locktable, protocol; client → protocol only. A package of the
// module in no area fails the check until it is given one here.
var mayImport = map[string][]string{
	"protocol":  nil,
	"locktable": nil,
	"client":    {"protocol"},
	"fence":     nil,
	// The loop knows its features through interfaces it declares; fdgate
	// is a leaf it shares with the HTTP listeners of the same process.
	"eventloop": {"locktable", "protocol", "internal/fdgate"},
	// TLS on the loop is a leaf below it: it reports events to the loop
	// and knows neither the loop nor the lock table.
	"eventloop/tlsconn": nil,
	// The features beside the loop: they know the loop only through
	// interfaces they declare themselves, which cmd/monolock fills in.
	"internal": {"locktable", "protocol"},
	// What tests and harnesses share starts the whole server in-process
	// and drives the clients; nothing of the server imports it.
	"internal/testsupport": {"internal", "eventloop", "locktable", "protocol", "client", "fence"},
	"internal/conformance": {"internal", "locktable", "protocol", "client"},
	// The binaries wire everything together.
	"cmd":    {"internal", "eventloop", "locktable", "protocol", "client", "fence"},
	"deploy": nil,
	"docs":   nil,
}

// TestDependenciesPointOneWay fails on an import, in a package of the main
// module (tests aside), that the rule in mayImport does not allow: an arrow
// pointing back up, such as a feature in internal/ importing the loop.
func TestDependenciesPointOneWay(t *testing.T) {
	root := repoRoot(t)
	_, modPath := module(t, root, ".")
	cmd := exec.Command("go", "list", "-e", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./... in %s: %v", root, err)
	}
	prefix := modPath + "/"
	var wrong []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || !strings.HasPrefix(fields[0], prefix) {
			continue
		}
		pkg := strings.TrimPrefix(fields[0], prefix)
		from, ok := area(pkg)
		if !ok {
			wrong = append(wrong, pkg+": in no area of the dependency rule; give its folder one in mayImport")
			continue
		}
		for _, imp := range fields[1:] {
			if !strings.HasPrefix(imp, prefix) {
				continue // the standard library or another module
			}
			dep := strings.TrimPrefix(imp, prefix)
			if !allowed(from, dep) {
				wrong = append(wrong, pkg+" imports "+dep+": "+from+" may import only "+describe(from))
			}
		}
	}
	sort.Strings(wrong)
	for _, w := range wrong {
		t.Error(w)
	}
	if len(wrong) > 0 {
		t.Log("the arrows point one way (README, Architecture): declare the interface in the package that " +
			"uses it, or move the shared type down to locktable or protocol, and wire the implementation in cmd/")
	}
}

// area returns the longest area of mayImport that pkg is in.
func area(pkg string) (string, bool) {
	best := ""
	for a := range mayImport {
		if within(pkg, a) && len(a) > len(best) {
			best = a
		}
	}
	return best, best != ""
}

// within reports whether pkg is the folder a or below it.
func within(pkg, a string) bool {
	return pkg == a || strings.HasPrefix(pkg, a+"/")
}

// allowed reports whether a package of area from may import dep.
func allowed(from, dep string) bool {
	if within(dep, from) {
		return true
	}
	for _, a := range mayImport[from] {
		if within(dep, a) {
			return true
		}
	}
	return false
}

func describe(from string) string {
	if len(mayImport[from]) == 0 {
		return "itself and other modules"
	}
	return strings.Join(mayImport[from], ", ") + " and itself"
}

func TestDependencyRuleAreas(t *testing.T) {
	for _, c := range []struct {
		from, dep string
		want      bool
	}{
		{"internal/adminhttp", "eventloop", false},
		{"internal/adminhttp", "internal/acl", true},
		{"internal/metrics", "eventloop", false},
		{"internal/testsupport/inproc", "eventloop", true},
		{"eventloop/timerwheel", "eventloop", true},
		{"eventloop", "eventloop/tlsconn", true},
		{"eventloop/tlsconn", "eventloop", false},
		{"eventloop/tlsconn", "protocol", false},
		{"client", "internal/testsupport/wire", false},
		{"cmd/monolock", "eventloop", true},
		{"locktable", "protocol", false},
	} {
		from, ok := area(c.from)
		if !ok {
			t.Fatalf("%s: in no area", c.from)
		}
		if got := allowed(from, c.dep); got != c.want {
			t.Errorf("%s (area %s) may import %s: got %v, want %v", c.from, from, c.dep, got, c.want)
		}
	}
}
