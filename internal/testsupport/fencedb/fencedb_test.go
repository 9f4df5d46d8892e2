package fencedb

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/monolock/monolock/fence"
	"github.com/monolock/monolock/internal/testsupport/testdb"
)

// The servers come from the environment (withdb sets it, as for package
// fence's tests); without it the test skips.
func TestStoreLandsOnlyAdmittedWrites(t *testing.T) {
	for _, c := range []struct {
		env string
		d   fence.Dialect
	}{{testdb.EnvPostgres, fence.PostgreSQL}, {testdb.EnvMySQL, fence.MySQL}} {
		t.Run(string(c.d), func(t *testing.T) {
			raw := os.Getenv(c.env)
			if raw == "" {
				t.Skipf("%s is not set: run under internal/testsupport/testdb/withdb", c.env)
			}
			s, err := Open(raw, c.d)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			res := "fencedb-" + t.Name()
			for _, stmt := range []string{"DELETE FROM monolock_writes", "DELETE FROM monolock_fence"} {
				if _, err := s.DB().Exec(stmt); err != nil {
					t.Fatal(err)
				}
			}
			const big = 1<<63 + 5 // past 2^63: ordered as unsigned
			for _, tok := range []uint64{7, big, big} {
				if err := s.Admit(ctx, res, tok); err != nil {
					t.Fatalf("admit %d: %v", tok, err)
				}
			}
			if err := s.Admit(ctx, res, 1<<63-1); !errors.Is(err, fence.ErrStale) {
				t.Fatalf("admit 2^63-1 after 2^63+5: %v; want fence.ErrStale", err)
			}
			got, err := s.Landed(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if l := got[res]; l.Writes != 3 || l.Stale != 0 {
				t.Fatalf("landed %+v; want 3 writes, none stale (the refused one rolled back)", l)
			}
			// A row written past the fence is read as a stale landed write.
			ins := insertPostgreSQL
			if c.d == fence.MySQL {
				ins = insertMySQL
			}
			if _, err := s.DB().Exec(ins, res, "8"); err != nil {
				t.Fatal(err)
			}
			got, err = s.Landed(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if l := got[res]; l.Writes != 4 || l.Stale != 1 {
				t.Fatalf("landed %+v; want 4 writes, 1 stale", l)
			}
		})
	}
}

func TestParseKind(t *testing.T) {
	for _, s := range []string{"memory", "postgres", "mariadb"} {
		if k, err := ParseKind(s); err != nil || string(k) != s {
			t.Fatalf("ParseKind(%q) = %q, %v", s, k, err)
		}
	}
	if _, err := ParseKind("mysql"); err == nil {
		t.Fatal("ParseKind(mysql) accepted")
	}
}
