package protocol_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The client step is specified in docs/protocol.md, "The client step", and
// its scripts (testdata/step) are run by every client. These tests keep the
// two in one vocabulary: a script uses only the events and actions the
// section's tables define, the section defines none no script uses, and the
// table of rules names the scripts that exist, all of them.

// stepSection returns the text of docs/protocol.md's "The client step".
func stepSection(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "\n## The client step\n")
	if !ok {
		t.Fatal(`docs/protocol.md has no section "## The client step"`)
	}
	section, _, _ := strings.Cut(rest, "\n## ")
	return section
}

// tableRows returns the rows (cells trimmed) of the first table under the
// subsection heading ("### Events"), without the header and the rule.
func tableRows(t *testing.T, section, heading string) [][]string {
	t.Helper()
	_, rest, ok := strings.Cut(section, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("The client step has no %q", heading)
	}
	var rows [][]string
	inTable := false
	for line := range strings.Lines(rest) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			if strings.HasPrefix(line, "### ") {
				break
			}
			continue
		}
		inTable = true
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows = append(rows, cells)
	}
	if len(rows) < 3 {
		t.Fatalf("%s: no table with rows under it", heading)
	}
	return rows[2:]
}

var backticked = regexp.MustCompile("^`([a-z-]+)`$")

// defined returns the names in the first column of a subsection's table.
func defined(t *testing.T, section, heading string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for _, row := range tableRows(t, section, heading) {
		m := backticked.FindStringSubmatch(row[0])
		if m == nil {
			t.Fatalf("%s: first cell %q is not a `name`", heading, row[0])
		}
		names[m[1]] = true
	}
	return names
}

// stepScript is what the vocabulary test reads of one script: the first
// word of each command and of each line of expected output, with its line.
type stepScript struct {
	commands, actions []struct {
		word string
		line int
	}
}

// readStepScript reads the datadriven format: a command line, "----", the
// expected actions up to a blank line; # comments and blank lines between.
func readStepScript(t *testing.T, path string) stepScript {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s stepScript
	inOutput := false
	n := 0
	for line := range strings.Lines(string(text)) {
		n++
		line = strings.TrimRight(line, "\n")
		word, _, _ := strings.Cut(line, " ")
		switch {
		case inOutput && line == "":
			inOutput = false
		case inOutput:
			s.actions = append(s.actions, struct {
				word string
				line int
			}{word, n})
		case line == "----":
			inOutput = true
		case line == "" || strings.HasPrefix(line, "#"):
		default:
			s.commands = append(s.commands, struct {
				word string
				line int
			}{word, n})
		}
	}
	return s
}

func stepScriptFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("testdata/step/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no step scripts in testdata/step (%v)", err)
	}
	return files
}

func TestStepScriptsUseTheDocumentedVocabulary(t *testing.T) {
	section := stepSection(t)
	events := defined(t, section, "### Events")
	actions := defined(t, section, "### Actions")
	usedEvents, usedActions := map[string]bool{}, map[string]bool{}
	for _, path := range stepScriptFiles(t) {
		s := readStepScript(t, path)
		for _, c := range s.commands {
			usedEvents[c.word] = true
			if !events[c.word] {
				t.Errorf("%s:%d: event %q is not in docs/protocol.md, The client step, Events", path, c.line, c.word)
			}
		}
		for _, a := range s.actions {
			usedActions[a.word] = true
			if !actions[a.word] {
				t.Errorf("%s:%d: action %q is not in docs/protocol.md, The client step, Actions", path, a.line, a.word)
			}
		}
	}
	for name := range events {
		if !usedEvents[name] {
			t.Errorf("event %q of docs/protocol.md is used by no script in testdata/step", name)
		}
	}
	for name := range actions {
		if !usedActions[name] {
			t.Errorf("action %q of docs/protocol.md is used by no script in testdata/step", name)
		}
	}
}

var scriptName = regexp.MustCompile("`([a-z-]+\\.txt)`")

func TestStepRulesTableNamesEveryScript(t *testing.T) {
	named := map[string]bool{}
	for _, row := range tableRows(t, stepSection(t), "### The rules, step by step") {
		for _, m := range scriptName.FindAllStringSubmatch(row[len(row)-1], -1) {
			named[m[1]] = true
		}
	}
	var files []string
	for _, path := range stepScriptFiles(t) {
		files = append(files, filepath.Base(path))
	}
	for name := range named {
		if !slices.Contains(files, name) {
			t.Errorf("docs/protocol.md's table of rules names %s, which is not in testdata/step", name)
		}
	}
	for _, f := range files {
		if !named[f] {
			t.Errorf("testdata/step/%s is named by no rule in docs/protocol.md's table of rules", f)
		}
	}
}
