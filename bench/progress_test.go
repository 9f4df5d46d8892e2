package main

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
		if isTerminal(out) {
			t.Errorf("%s taken for a terminal", name)
		}
	}
	var log bytes.Buffer
	p := newProgress(&log, 3, isTerminal(&log))
	p.step("S1")
	p.log("a line")
	p.finish()
	if got := log.String(); got != "a line\n" {
		t.Errorf("redirected output %q, want only the logged line", got)
	}
}
