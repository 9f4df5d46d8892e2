package gocronlock_test

import (
	"os"
	"strings"
	"testing"
)

// The programs of docs/integrations.md are internal/example's, which the
// module's build and vet check: a change to one without the other fails.
func TestDocsShowTheExamples(t *testing.T) {
	doc, err := os.ReadFile("../../docs/integrations.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"internal/example/locker/main.go", "internal/example/elector/main.go"} {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(doc), "```go\n"+string(src)+"```\n") {
			t.Errorf("docs/integrations.md does not show %s as it is: copy the file into its go block", file)
		}
	}
}
