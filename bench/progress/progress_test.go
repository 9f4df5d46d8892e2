package progress

import (
	"bytes"
	"os"
	"testing"
)

// A redirected log gets no bar: neither a buffer nor a pipe is a terminal.
func TestProgressBarOnlyOnATerminal(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for name, out := range map[string]interface{ Write([]byte) (int, error) }{"buffer": &bytes.Buffer{}, "pipe": w} {
		if IsTerminal(out) {
			t.Errorf("%s taken for a terminal", name)
		}
	}
	var log bytes.Buffer
	p := New(&log, 3, IsTerminal(&log))
	p.Step("S1")
	p.Log("a line")
	p.Finish()
	if got := log.String(); got != "a line\n" {
		t.Errorf("redirected output %q, want only the logged line", got)
	}
}
