package fence_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/monolock/monolock/fence"
)

// sqlVectors reads testdata/sql.txt, the fencing SQL every client sends: its
// header says the format. The keys are "DIALECT NAME", such as
// "postgresql admit".
func sqlVectors(t *testing.T) map[string]string {
	t.Helper()
	text, err := os.ReadFile("testdata/sql.txt")
	if err != nil {
		t.Fatal(err)
	}
	vectors := map[string]string{}
	var name string
	var body []string
	flush := func() {
		if name != "" {
			vectors[name] = strings.Join(body, "\n")
		}
	}
	for line := range strings.Lines(string(text)) {
		line = strings.TrimSuffix(line, "\n")
		if strings.HasPrefix(line, "-- ") && strings.HasSuffix(line, " --") {
			flush()
			name, body = strings.TrimSuffix(strings.TrimPrefix(line, "-- "), " --"), nil
			if _, dup := vectors[name]; dup {
				t.Fatalf("testdata/sql.txt: section %q twice", name)
			}
			continue
		}
		if name != "" {
			body = append(body, line)
		}
	}
	flush()
	return vectors
}

// TestSQLVectors: the package's statements are the vectors, byte for byte.
func TestSQLVectors(t *testing.T) {
	v := sqlVectors(t)
	for _, d := range dialects {
		pre := string(d) + " "
		if got, want := fence.Schema(d), v[pre+"schema"]; got != want {
			t.Errorf("Schema(%s) differs from testdata/sql.txt:\n got %q\nwant %q", d, got, want)
		}
		if got, want := fence.AdmitStatement(d), v[pre+"admit"]; got != want {
			t.Errorf("AdmitStatement(%s) differs from testdata/sql.txt:\n got %q\nwant %q", d, got, want)
		}
		var want []string
		if drop, ok := v[pre+"drop-function"]; ok {
			want = append(want, drop)
		}
		want = append(want, v[pre+"function"])
		if got := fence.AdmitFunction(d); !slices.Equal(got, want) {
			t.Errorf("AdmitFunction(%s) differs from testdata/sql.txt:\n got %q\nwant %q", d, got, want)
		}
	}
	if len(v) != 7 {
		t.Errorf("testdata/sql.txt has %d sections, want the 7 this test checks", len(v))
	}
}

// TestDocsShowTheSQLVectors: docs/fencing.md shows every statement of the
// vectors as whole lines (the MySQL function's DROP ends with the ";" a
// script needs between statements).
func TestDocsShowTheSQLVectors(t *testing.T) {
	doc, err := os.ReadFile("../docs/fencing.md")
	if err != nil {
		t.Fatal(err)
	}
	for name, stmt := range sqlVectors(t) {
		if !strings.Contains(string(doc), "\n"+stmt+"\n") && !strings.Contains(string(doc), "\n"+stmt+";\n") {
			t.Errorf("docs/fencing.md does not show the %s statement of fence/testdata/sql.txt as whole lines:\n%s", name, stmt)
		}
	}
}
