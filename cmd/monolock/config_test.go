package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestSettingsPrecedence(t *testing.T) {
	vars := map[string]string{"MONOLOCK_IO_TIMEOUT": "2s", "MONOLOCK_LISTEN_ADDRESS": "127.0.0.1:9999", "MONOLOCK_LOG_LEVEL": "warn"}
	s, err := parseSettings([]string{"-io-timeout", "3s"}, env(vars), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if s.ioTimeout != 3*time.Second {
		t.Errorf("flag must beat environment: io-timeout %v", s.ioTimeout)
	}
	if s.listen != "127.0.0.1:9999" || s.logLevel != zerolog.WarnLevel {
		t.Errorf("environment must beat default: listen %q level %v", s.listen, s.logLevel)
	}
	if s.logFormat != "text" {
		t.Errorf("default log format %q", s.logFormat)
	}
	d, err := parseSettings(nil, env(nil), &bytes.Buffer{})
	if err != nil || d.listen != "0.0.0.0:7070" || d.ioTimeout != 5*time.Second || d.logLevel != zerolog.InfoLevel {
		t.Errorf("defaults: %+v, %v", d, err)
	}
}

func TestBadSettingsExit2(t *testing.T) {
	cases := []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"-io-timeout", "soon"}, "", "invalid -io-timeout"},
		{[]string{"-listen", ""}, "", `invalid -listen: want host:port, such as 127.0.0.1:7070 (":7070" listens on every address), got an empty value`},
		{[]string{"-listen", " "}, "", "invalid -listen"},
		{[]string{"-io-timeout", "-1s"}, "", "invalid -io-timeout"},
		{nil, "MONOLOCK_IO_TIMEOUT=0s", "invalid MONOLOCK_IO_TIMEOUT"},
		{[]string{"-tls-handshakes", "0"}, "", "invalid -tls-handshakes"},
		{[]string{"-shutdown-delay", "-1s"}, "", "invalid -shutdown-delay"},
		{nil, "MONOLOCK_SHUTDOWN_DELAY=5", "invalid MONOLOCK_SHUTDOWN_DELAY"},
		{[]string{"-log-level", "loud"}, "", "invalid -log-level"},
		{[]string{"-log-format", "xml"}, "", "invalid -log-format"},
		{[]string{"-no-such-flag"}, "", "flag provided but not defined"},
		{[]string{"extra"}, "", "unexpected argument"},
		{[]string{"-ha-cluster", "locks"}, "", "-ha-cluster needs -ha-etcd"},
		{[]string{"-ha-etcd", "http://127.0.0.1:2379"}, "", "-ha-etcd needs -ha-cluster"},
		{[]string{"-ha-etcd", "127.0.0.1:2379", "-ha-cluster", "locks"}, "", "invalid -ha-etcd: want comma-separated etcd client URLs"},
		{[]string{"-ha-ttl", "1500ms"}, "", "invalid -ha-ttl: want whole seconds of at least 2s"},
		{[]string{"-ha-ttl", "1s"}, "", "invalid -ha-ttl"},
		{nil, "MONOLOCK_HA_CLUSTER=a/b", "invalid MONOLOCK_HA_CLUSTER"},
		{[]string{"-ha-etcd", "http://127.0.0.1:2379", "-ha-cluster", "locks", "-listen", "127.0.0.1:0"}, "", "give a fixed port"},
		{[]string{"-ha-etcd", "http://127.0.0.1:2379", "-ha-cluster", "locks", "-listen", "127.0.0.1:7070", "-ha-etcd-cert", "c.pem"}, "", "-ha-etcd-cert and -ha-etcd-key go together"},
	}
	for _, c := range cases {
		cmd := exec.Command(binary, c.args...)
		if c.env != "" {
			cmd.Env = append(cmd.Environ(), c.env)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		exit, ok := err.(*exec.ExitError)
		if !ok || exit.ExitCode() != 2 {
			t.Errorf("%v %s: exit %v, want status 2", c.args, c.env, err)
		}
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		if len(lines) != 1 || !strings.Contains(lines[0], c.want) {
			t.Errorf("%v %s: stderr %q, want one line containing %q", c.args, c.env, stderr.String(), c.want)
		}
	}
}

func TestHelpPrintsTheTable(t *testing.T) {
	out, err := exec.Command(binary, "-h").CombinedOutput()
	if err != nil {
		t.Fatalf("-h: %v", err)
	}
	for _, st := range table {
		if !bytes.Contains(out, []byte("-"+st.flag)) || !bytes.Contains(out, []byte(st.env)) || !bytes.Contains(out, []byte(st.def)) {
			t.Errorf("-h lacks the row for -%s:\n%s", st.flag, out)
		}
	}
}

// TestUnreadableFileNamesItsSetting: a file the server cannot open is
// reported with the setting that named it, as the operator gave it, and
// with both ways to set it; exit status 2, one line.
func TestUnreadableFileNamesItsSetting(t *testing.T) {
	dir, pki, _ := labFiles(t)
	missing := filepath.Join(dir, "missing.pem")
	unreadable := filepath.Join(dir, "secret.key")
	if err := os.WriteFile(unreadable, []byte("x"), 0o000); err != nil {
		t.Fatal(err)
	}
	denied := "permission denied; the server's user must be able to read it"
	if f, err := os.Open(unreadable); err == nil { // root reads anything
		_ = f.Close()
		denied = ""
	}
	cases := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"-tls-cert", missing, "-tls-key", missing}, nil,
			"monolock: -tls-cert " + missing + ": no such file or directory; check the path (set the file with -tls-cert or MONOLOCK_TLS_CERT)"},
		{[]string{"-tls-key", missing}, map[string]string{"MONOLOCK_TLS_CERT": missing},
			"monolock: MONOLOCK_TLS_CERT=" + missing + ": no such file or directory; check the path (set the file with -tls-cert or MONOLOCK_TLS_CERT)"},
		{[]string{"-tls-cert", unreadable, "-tls-key", unreadable}, nil,
			"monolock: -tls-cert " + unreadable + ": " + denied + " (set the file with -tls-cert or MONOLOCK_TLS_CERT)"},
		{[]string{"-listen", "127.0.0.1:0", "-tls-cert", pki.Server.Cert, "-tls-key", pki.Server.Key, "-tls-client-ca", pki.CA}, map[string]string{"MONOLOCK_ACL_FILE": missing},
			"monolock: MONOLOCK_ACL_FILE=" + missing + ": no such file or directory; check the path (set the file with -acl-file or MONOLOCK_ACL_FILE)"},
	}
	for _, c := range cases {
		if strings.Contains(c.want, ":  (") {
			continue // as root nothing is unreadable
		}
		var stderr bytes.Buffer
		status := run(c.args, env(c.env), &stderr, signals{})
		if got := strings.TrimSuffix(stderr.String(), "\n"); status != 2 || got != c.want {
			t.Errorf("%v %v: status %d, stderr:\n%s\nwant status 2 and\n%s", c.args, c.env, status, got, c.want)
		}
	}
}

// TestOperationsTableHasEverySetting: docs/operations.md's configuration
// table has a row for every setting of the server, with its environment
// variable and its default, and no row for a setting that does not exist.
func TestOperationsTableHasEverySetting(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{} // flag -> cells
	for _, line := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(line, "| `-") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if len(cells) < 4 {
			continue // another table's row
		}
		rows[strings.Trim(cells[0], "`-")] = cells
	}
	known := map[string]bool{}
	for _, st := range table {
		known[st.flag] = true
		cells, ok := rows[st.flag]
		switch {
		case !ok:
			t.Errorf("docs/operations.md's configuration table has no row for -%s", st.flag)
			continue
		case cells[1] != "`"+st.env+"`":
			t.Errorf("-%s: environment %s in the table, want `%s`", st.flag, cells[1], st.env)
		}
		if def := cells[2]; st.def == "" && def != "" && def != "(empty = off)" || st.def != "" && def != "`"+st.def+"`" {
			t.Errorf("-%s: default %q in the table, want `%s`", st.flag, def, st.def)
		}
	}
	for flag, cells := range rows {
		if strings.HasPrefix(cells[1], "`MONOLOCK_") && !known[flag] {
			t.Errorf("docs/operations.md's configuration table has a row for -%s, which the server does not have", flag)
		}
	}
}
