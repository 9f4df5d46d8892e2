package certs

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadTicketKeys(t *testing.T) {
	k1, k2 := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	enc := base64.StdEncoding.EncodeToString
	path := filepath.Join(t.TempDir(), "keys")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("# issuing key first\n" + enc(k1) + "\r\n\n  " + enc(k2) + "  \n")
	keys, err := LoadTicketKeys(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || !bytes.Equal(keys[0][:], k1) || !bytes.Equal(keys[1][:], k2) {
		t.Fatalf("keys %x, want k1 then k2", keys)
	}
	for _, c := range []struct{ content, want string }{
		{"", "holds no key"},
		{enc(k1) + "\n" + enc(k1[:31]) + "\n", "line 2: the key is 31 bytes, want 32"},
		{enc(append(k1, 0)) + "\n", "line 1: the key is 33 bytes, want 32"},
		{"----\n", "line 1: not base64"},
	} {
		write(c.content)
		_, err := LoadTicketKeys(path)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "openssl rand -base64 32") {
			t.Errorf("%q: %v, want an error with %q and how to make a key", c.content, err, c.want)
		}
	}
}
