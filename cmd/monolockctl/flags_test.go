package main

import (
	"strings"
	"testing"
)

// A usage mistake is one line on stderr that names it and says where the help
// is, with exit status 2; it is never the whole help text.
func TestUsageMistakesAreOneLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{"run", "-bogus", "x", "--", "true"}, nil,
			"monolockctl run: flag provided but not defined: -bogus; run 'monolockctl run -h' for usage"},
		{[]string{"run", "-lease", "soon", "x", "--", "true"}, nil,
			`monolockctl run: invalid value "soon" for flag -lease: want a duration with its unit, such as 2s, 500ms or 1m30s; run 'monolockctl run -h' for usage`},
		{[]string{"run", "-lease", "2", "x", "--", "true"}, nil,
			`monolockctl run: invalid value "2" for flag -lease: want a duration with its unit, such as 2s, 500ms or 1m30s`},
		{[]string{"run", "-wait", "10", "x", "--", "true"}, nil,
			`monolockctl run: invalid value "10" for flag -wait: want a duration with its unit`},
		{[]string{"locks", "-bogus"}, nil, "monolockctl locks: flag provided but not defined: -bogus; run 'monolockctl locks -h' for usage"},
		{[]string{"audit-check", "-bogus", "-"}, nil, "monolockctl audit-check: flag provided but not defined: -bogus"},
		{[]string{"-addr", "127.0.0.1:7070", "run"}, nil, `monolockctl: unknown command "-addr"; run 'monolockctl -h' for usage`},
		// An address no one can dial is a usage error, not an unreachable server.
		{[]string{"run", "-addr", "nonsense", "x", "--", "true"}, nil,
			`monolockctl run: invalid value "nonsense" for flag -addr: want host:port, such as 127.0.0.1:7070, got "nonsense"`},
		{[]string{"run", "-addr", "127.0.0.1:99999", "x", "--", "true"}, nil, "is not between 1 and 65535"},
		{[]string{"run", "-addr", "127.0.0.1:no-such-service", "x", "--", "true"}, nil, "neither a number nor a known service"},
		{[]string{"info", "-addr", "nonsense"}, nil, `invalid value "nonsense" for flag -addr`},
		{[]string{"run", "x", "--", "true"}, []string{"MONOLOCK_ADDRESS=nonsense"},
			`monolockctl run: MONOLOCK_ADDRESS: want host:port, such as 127.0.0.1:7070, got "nonsense"`},
		// White space at either end is the same mistake, whichever end.
		{[]string{"run", "x", "--", "true"}, []string{"MONOLOCK_ADDRESS= 127.0.0.1:7070"},
			`monolockctl run: MONOLOCK_ADDRESS: " 127.0.0.1:7070" has white space around it; remove it`},
		{[]string{"run", "x", "--", "true"}, []string{"MONOLOCK_ADDRESS=127.0.0.1:7070 "},
			`monolockctl run: MONOLOCK_ADDRESS: "127.0.0.1:7070 " has white space around it; remove it`},
		{[]string{"run", "-addr", " 127.0.0.1:7070", "x", "--", "true"}, nil, "has white space around it"},
	} {
		status, stdout, stderr := runCtl(t, "", tc.env, tc.args...)
		if status != exitUsage || stdout != "" || !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: status %d, stdout %q, stderr %q; want status %d and one line with %q",
				tc.args, status, stdout, stderr, exitUsage, tc.want)
		}
	}
}

func TestCheckAddress(t *testing.T) {
	for _, ok := range []string{"127.0.0.1:7070", "localhost:7070", "[::1]:7070", ":7070", "locks.example.com:http"} {
		if err := checkAddress(ok); err != nil {
			t.Errorf("checkAddress(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"", "nonsense", "127.0.0.1", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65536", "::1:7070", "host:no-such-service", " 127.0.0.1:7070", "127.0.0.1:7070 ", "\t:7070"} {
		if err := checkAddress(bad); err == nil {
			t.Errorf("checkAddress(%q) = nil, want an error", bad)
		}
	}
}
