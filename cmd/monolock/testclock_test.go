package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/monolock/monolock/internal/testsupport/poll"
	"github.com/monolock/monolock/internal/testsupport/proc"
	"github.com/monolock/monolock/internal/testsupport/wire"
)

// The offset file is read at first use; a file that is missing or does not
// hold a duration leaves the last offset.
func TestFileClockOffset(t *testing.T) {
	path := filepath.Join(t.TempDir(), "offset")
	f := &fileClockOffset{path: path}
	if got := f.get(); got != 0 {
		t.Fatalf("missing file: %v, want 0", got)
	}
	if err := os.WriteFile(path, []byte("-1h\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.readAt = time.Time{} // due for a reread
	if got := f.get(); got != -time.Hour {
		t.Fatalf("-1h: %v", got)
	}
	if err := os.WriteFile(path, []byte("an hour ago"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.readAt = time.Time{}
	if got := f.get(); got != -time.Hour {
		t.Fatalf("unparsable file: %v, want the last offset", got)
	}
}

// A real server given the knob: its first token reads the clock an hour
// back; once the file says 0s its tokens follow the clock again; stepped
// back once more, its tokens still increase.
func TestWallClockOffsetFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "offset")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("-1h")
	p, err := proc.Monolock(binary, proc.Options{Env: []string{testClockOffsetEnv + "=" + path}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	lock := 0
	token := func() uint64 {
		lock++
		c, tok := wire.Holder(t, p.Addr, wire.Options{}, fmt.Sprintf("l%d", lock), testLease)
		c.SendRelease()
		return tok
	}
	hourAgo := time.Now().Add(-time.Hour).Unix()
	if s := int64(token() >> 32); s < hourAgo-60 || s > hourAgo+60 {
		t.Fatalf("first token's seconds %d, want about %d (an hour back)", s, hourAgo)
	}
	write("0s")
	var last uint64
	if err := poll.Until(10*time.Second, func() error {
		last = token()
		if s := int64(last >> 32); s < time.Now().Unix()-60 {
			return fmt.Errorf("token's seconds %d still an hour back", s)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	write("-1h")
	for range 3 {
		if tok := token(); tok <= last {
			t.Fatalf("after the clock stepped back: token %d, not above %d", tok, last)
		} else {
			last = tok
		}
	}
}
